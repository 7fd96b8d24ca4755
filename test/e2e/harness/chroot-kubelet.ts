/**
 * A stand-in for the kubelet, which the e2e control plane has none of: it runs the pods of one namespace (the ones
 * kube-controller-manager's Deployment, ReplicaSet and Job controllers create) from their image's root filesystem
 * under `chroot` as the image's user, and reports them back as a kubelet would, so `helm install`, `kubectl rollout
 * status`, the apiserver's webhook calls through a Service and its service and pod proxies work as on a cluster.
 *
 * Per pod: the image is pulled once (`pull`, e.g. `crane export`), the root filesystem is hard-linked into a
 * directory of its own, the container's Secret, ConfigMap and emptyDir volumes and its ServiceAccount token
 * (TokenRequest, at /var/run/secrets/kubernetes.io/serviceaccount, with KUBERNETES_SERVICE_HOST/PORT naming the
 * apiserver) are written there as the image's user, and its command runs with the container's args and env. Each
 * pod gets an address of its own, a /32 on the loopback interface (10.244.0.N: not in 127.0.0.0/8, which
 * EndpointSlices refuse), and `serve` is given `--host` that address, as a pod's own network namespace would.
 * Status: Running with podIP (Ready once the readiness probe's HTTP GET answers 200), then Succeeded or Failed
 * with the exit code. EndpointSlices for the namespace's Services name the ready pods, as the EndpointSlice
 * controller would. A pod deleted is stopped. Needs root (chroot, `ip addr`); `stop()` removes every address.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chownSync, existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { get } from "node:http";
import { join } from "node:path";
import type { ControlPlane } from "./controlplane.js";

type Obj = Record<string, any>;

export interface ChrootKubeletOptions {
  namespace: string;
  /** Scratch directory for the pods' root filesystems. */
  dir: string;
  /** Pulls `image` and returns the directory of its root filesystem (called once per image). */
  pull(image: string): Promise<string>;
  user: { uid: number; gid: number };
  /** The image's entry point and environment (`KEY=value`). */
  entrypoint: readonly string[];
  env: readonly string[];
}

export interface ChrootKubelet {
  /** Names of the pods run so far, with their exit codes once exited. */
  pods(): Array<{ name: string; ip: string; exitCode: number | null }>;
  /** The pods' output, for failure messages. */
  log(): string;
  stop(): Promise<void>;
}

interface Running {
  name: string;
  ip: string;
  proc?: ChildProcess;
  exitCode: number | null;
  ready: boolean;
  probe?: { port: number; path: string };
  ports: Record<string, number>;
  labels: Record<string, string>;
  reported: string;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function chownTree(path: string, uid: number, gid: number): void {
  chownSync(path, uid, gid);
  if (statSync(path).isDirectory()) for (const e of readdirSync(path)) chownTree(join(path, e), uid, gid);
}

function httpOk(host: string, port: number, path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = get({ host, port, path, timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on("error", () => resolve(false));
    req.on("timeout", () => req.destroy());
  });
}

export async function startChrootKubelet(cp: ControlPlane, o: ChrootKubeletOptions): Promise<ChrootKubelet> {
  const ns = o.namespace;
  const images = new Map<string, Promise<string>>();
  const pods = new Map<string, Running>();
  const addresses: string[] = [];
  let next = 10;
  let output = "";
  let stopped = false;
  let slices = "";

  const patchStatus = async (name: string, status: Obj): Promise<void> => {
    await cp.api("PATCH", `/api/v1/namespaces/${ns}/pods/${name}/status`, { status }, { "content-type": "application/merge-patch+json" });
  };

  const secretFiles = async (kind: "secrets" | "configmaps", name: string): Promise<Record<string, Buffer> | undefined> => {
    const r = await cp.api("GET", `/api/v1/namespaces/${ns}/${kind}/${name}`);
    if (r.status !== 200) return undefined;
    const files: Record<string, Buffer> = {};
    for (const [k, v] of Object.entries((r.body.data ?? {}) as Record<string, string>))
      files[k] = kind === "secrets" ? Buffer.from(v, "base64") : Buffer.from(v);
    return files;
  };

  /** Writes the pod's volumes into its root; false when one is not there yet (the kubelet waits too). */
  const mount = async (pod: Obj, root: string): Promise<boolean> => {
    const c = pod.spec.containers[0];
    for (const m of (c.volumeMounts ?? []) as Obj[]) {
      const v = (pod.spec.volumes as Obj[]).find((x) => x.name === m.name);
      const target = join(root, m.mountPath);
      let files: Record<string, Buffer> | undefined = {};
      if (v?.secret) files = await secretFiles("secrets", v.secret.secretName);
      else if (v?.configMap) files = await secretFiles("configmaps", v.configMap.name);
      if (!files) return false;
      mkdirSync(target, { recursive: true });
      for (const [k, data] of Object.entries(files)) writeFileSync(join(target, k), data);
      chownTree(target, o.user.uid, o.user.gid);
    }
    const sa = pod.spec.serviceAccountName ?? "default";
    const tr = await cp.api("POST", `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { expirationSeconds: 3600 },
    });
    if (tr.status !== 201) return false;
    const saDir = join(root, "var/run/secrets/kubernetes.io/serviceaccount");
    mkdirSync(saDir, { recursive: true });
    writeFileSync(join(saDir, "token"), tr.body.status.token as string);
    writeFileSync(join(saDir, "ca.crt"), cp.tls.ca);
    writeFileSync(join(saDir, "namespace"), ns);
    chownTree(join(root, "var/run/secrets"), o.user.uid, o.user.gid);
    return true;
  };

  const start = async (pod: Obj): Promise<void> => {
    const name = pod.metadata.name as string;
    const c = pod.spec.containers[0];
    let image = images.get(c.image);
    if (!image) images.set(c.image, (image = o.pull(c.image)));
    const root = join(o.dir, name);
    // Hard links: the image's files are shared, each pod's directories (and the volumes written in them) its own.
    if (!existsSync(root) && spawnSync("cp", ["-al", await image, root]).status !== 0) throw new Error(`cp -al ${root} failed`);
    if (!(await mount(pod, root))) {
      return; // retried on the next round
    }
    const ip = `10.244.0.${next++}`;
    if (spawnSync("ip", ["addr", "add", `${ip}/32`, "dev", "lo"]).status !== 0) throw new Error(`ip addr add ${ip}/32 dev lo failed`);
    addresses.push(ip);
    const ports: Record<string, number> = {};
    for (const p of (c.ports ?? []) as Obj[]) if (p.name) ports[p.name] = p.containerPort;
    const args: string[] = [...((c.command as string[] | undefined) ?? o.entrypoint), ...((c.args as string[] | undefined) ?? [])];
    if (c.args?.[0] === "serve") args.push(`--host=${ip}`);
    const env: Record<string, string> = Object.fromEntries(o.env.map((e) => e.split("=", 2) as [string, string]));
    for (const e of (c.env ?? []) as Obj[]) if (typeof e.value === "string") env[e.name] = e.value;
    Object.assign(env, { KUBERNETES_SERVICE_HOST: "127.0.0.1", KUBERNETES_SERVICE_PORT: String(cp.apiPort), HOSTNAME: name });
    const proc = spawn("chroot", [`--userspec=${o.user.uid}:${o.user.gid}`, root, ...args], { env, cwd: "/", stdio: ["ignore", "pipe", "pipe"] });
    const probe = c.readinessProbe?.httpGet as Obj | undefined;
    const run: Running = {
      name,
      ip,
      proc,
      exitCode: null,
      ready: !probe,
      probe: probe ? { port: typeof probe.port === "number" ? probe.port : ports[probe.port]!, path: probe.path } : undefined,
      ports,
      labels: pod.metadata.labels ?? {},
      reported: "",
    };
    pods.set(name, run);
    const tag = (d: Buffer): void => {
      output += d
        .toString()
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => `[${name}] ${l}\n`)
        .join("");
    };
    proc.stdout!.on("data", tag);
    proc.stderr!.on("data", tag);
    proc.on("exit", (code, signal) => {
      run.exitCode = code ?? (signal ? 128 : 1);
      run.ready = false;
    });
    await patchStatus(name, {
      phase: "Running",
      hostIP: "127.0.0.1",
      podIP: ip,
      podIPs: [{ ip }],
      startTime: new Date().toISOString(),
    });
  };

  const report = async (run: Running, pod: Obj): Promise<void> => {
    const now = new Date().toISOString();
    let status: Obj;
    if (run.exitCode !== null) {
      const terminated = { exitCode: run.exitCode, reason: run.exitCode === 0 ? "Completed" : "Error", startedAt: now, finishedAt: now };
      status = {
        phase: run.exitCode === 0 ? "Succeeded" : "Failed",
        conditions: [{ type: "Ready", status: "False", lastTransitionTime: now }],
        containerStatuses: [
          { name: pod.spec.containers[0].name, image: pod.spec.containers[0].image, imageID: "", ready: false, restartCount: 0, state: { terminated } },
        ],
      };
    } else {
      const ready = run.ready ? "True" : "False";
      status = {
        phase: "Running",
        conditions: ["PodScheduled", "Initialized", "ContainersReady", "Ready"].map((type) => ({
          type,
          status: type === "PodScheduled" || type === "Initialized" ? "True" : ready,
          lastTransitionTime: now,
        })),
        containerStatuses: [
          {
            name: pod.spec.containers[0].name,
            image: pod.spec.containers[0].image,
            imageID: "",
            ready: run.ready,
            started: true,
            restartCount: 0,
            state: { running: { startedAt: now } },
          },
        ],
      };
    }
    const key = `${status.phase}/${run.ready}`;
    if (key === run.reported) return;
    run.reported = key;
    await patchStatus(run.name, status);
  };

  const endpointSlices = async (): Promise<void> => {
    const services = ((await cp.api("GET", `/api/v1/namespaces/${ns}/services`)).body.items ?? []) as Obj[];
    const want: Obj[] = [];
    for (const svc of services) {
      const selector = (svc.spec.selector ?? {}) as Record<string, string>;
      const members = [...pods.values()].filter((p) => p.ready && Object.entries(selector).every(([k, v]) => p.labels[k] === v));
      for (const port of (svc.spec.ports ?? []) as Obj[]) {
        const byPort = new Map<number, Running[]>();
        for (const p of members) {
          const n = typeof port.targetPort === "number" ? port.targetPort : p.ports[port.targetPort];
          if (n !== undefined) byPort.set(n, [...(byPort.get(n) ?? []), p]);
        }
        for (const [n, ps] of byPort) {
          want.push({
            apiVersion: "discovery.k8s.io/v1",
            kind: "EndpointSlice",
            metadata: {
              name: `${svc.metadata.name}-${port.name}-${n}`,
              namespace: ns,
              labels: { "kubernetes.io/service-name": svc.metadata.name, "endpointslice.kubernetes.io/managed-by": "chroot-kubelet.e2e.quartermaster.dev" },
            },
            addressType: "IPv4",
            ports: [{ name: port.name, port: n, protocol: "TCP" }],
            endpoints: ps.map((p) => ({
              addresses: [p.ip],
              conditions: { ready: true, serving: true, terminating: false },
              targetRef: { kind: "Pod", namespace: ns, name: p.name },
            })),
          });
        }
      }
    }
    const text = JSON.stringify(want);
    if (text === slices) return;
    slices = text;
    await cp.api(
      "DELETE",
      `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices?labelSelector=endpointslice.kubernetes.io/managed-by%3Dchroot-kubelet.e2e.quartermaster.dev`,
    );
    for (const s of want) await cp.api("POST", `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`, s);
  };

  const round = async (): Promise<void> => {
    const list = ((await cp.api("GET", `/api/v1/namespaces/${ns}/pods`)).body.items ?? []) as Obj[];
    const present = new Set(list.filter((p) => !p.metadata.deletionTimestamp).map((p) => p.metadata.name as string));
    for (const run of pods.values()) {
      if (!present.has(run.name) && run.exitCode === null) {
        run.proc?.kill("SIGTERM");
        run.ready = false;
      }
    }
    for (const pod of list) {
      const name = pod.metadata.name as string;
      if (pod.metadata.deletionTimestamp) {
        await cp.api("DELETE", `/api/v1/namespaces/${ns}/pods/${name}`, { apiVersion: "v1", kind: "DeleteOptions", gracePeriodSeconds: 0 });
        continue;
      }
      const run = pods.get(name);
      if (!run) {
        await start(pod);
        continue;
      }
      if (run.exitCode === null && !run.ready && run.probe) run.ready = await httpOk(run.ip, run.probe.port, run.probe.path);
      await report(run, pod);
    }
    await endpointSlices();
  };

  // Also when the test process exits without stop(): no pod left running, no address left on lo.
  const onExit = (): void => {
    for (const run of pods.values()) if (run.exitCode === null) run.proc?.kill("SIGKILL");
    for (const ip of addresses.splice(0)) spawnSync("ip", ["addr", "del", `${ip}/32`, "dev", "lo"]);
  };
  process.on("exit", onExit);

  const loop = (async () => {
    while (!stopped) {
      try {
        await round();
      } catch (err) {
        output += `[chroot-kubelet] ${(err as Error).stack ?? String(err)}\n`;
      }
      await sleep(300);
    }
  })();

  return {
    pods: () => [...pods.values()].map((p) => ({ name: p.name, ip: p.ip, exitCode: p.exitCode })),
    log: () => output.split("\n").slice(-200).join("\n"),
    async stop() {
      stopped = true;
      await loop;
      for (const run of pods.values()) {
        if (run.exitCode !== null || !run.proc) continue;
        run.proc.kill("SIGTERM");
        const exited = await Promise.race([new Promise((r) => run.proc!.once("exit", () => r(true))), sleep(10_000).then(() => false)]);
        if (!exited) run.proc.kill("SIGKILL");
      }
      onExit();
      process.off("exit", onExit);
    },
  };
}
