/**
 * bench/admit-large: `quartermaster admit -f BIG.yaml` on a ~50 MB multi-document YAML file (issue 48), against
 * the `yaml` package alone parsing the same file in the same run. Targets: the CLI's wall time at most 3× the
 * parse, and its peak RSS under 500 MB.
 *
 *   npm run bench:admit-large [-- --mb 50] [--keep]
 *
 * Writes BIG.yaml in a temporary directory: realistic objects in a fixed mix (GPU pods with a node selector, volumes
 * and env; PyTorchJobs of 1 Master + 1–7 Workers; Deployments of inference servers, two in three with a GPU), each
 * named and varied by its index. Then, in this process, times the yaml package's `parseAllDocuments` of the file's
 * text (its defaults, the best of two runs: the baseline of the ratio), and for reference its Parser and Composer
 * handing over one document at a time (none held), and the CLI's own reading (YAML 1.1, merge keys, `toJS` of
 * every document). Then runs the CLI as it ships (`node bin/quartermaster.js admit -f BIG.yaml`, after
 * `npm run build`) as a child process, stdout to a file and stderr to another, and measures its wall time here and
 * its peak RSS in the child (bench/lib/rusage-at-exit.mjs). Prints the figures, the ratios, a pass/fail mark for
 * each target, the progress lines the CLI wrote on stderr, and checks the output holds one document per input.
 */
import { spawn } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { Composer, LineCounter, Parser, parseAllDocuments } from "yaml";
import { parseManifestDocuments } from "../src/cli/manifest-yaml.js";

const ROOT = resolve(import.meta.dirname, "..");
const { values } = parseArgs({ options: { mb: { type: "string", default: "50" }, keep: { type: "boolean", default: false } } });
const TARGET_BYTES = Number(values.mb) * 1024 * 1024;
const MAX_RATIO = 3;
const MAX_RSS_MB = 500;

const TEAMS = ["team-nlp", "team-vision", "team-speech", "team-rl", "research", "platform"];
const GPUS = ["1", "2", "4", "8"];
const IMAGES = [
  "nvcr.io/nvidia/pytorch:24.05-py3",
  "ghcr.io/acme/trainer:3.2.1",
  "registry.example.com/ml/llm-train:2025.11",
  "nvcr.io/nvidia/tritonserver:24.05-py3",
];

const pick = <T>(xs: readonly T[], i: number): T => xs[i % xs.length]!;

function gpuPod(i: number): string {
  const team = pick(TEAMS, i);
  const gpus = pick(GPUS, i >> 1);
  return `apiVersion: v1
kind: Pod
metadata:
  name: notebook-${i}
  namespace: ${team}
  labels:
    app.kubernetes.io/name: notebook
    app.kubernetes.io/instance: notebook-${i}
    owner: user-${i % 97}
  annotations:
    example.com/cost-center: "cc-${1000 + (i % 40)}"
spec:
  restartPolicy: Never
  priorityClassName: interactive
  nodeSelector:
    nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
  containers:
    - name: main
      image: ${pick(IMAGES, i)}
      command: ["python", "-m", "jupyterlab", "--ip=0.0.0.0", "--port=8888"]
      env:
        - name: NCCL_DEBUG
          value: WARN
        - name: HF_HOME
          value: /cache/hf
        - name: RUN_ID
          value: "run-${i}"
      ports:
        - name: http
          containerPort: 8888
      resources:
        limits:
          cpu: "${4 * Number(gpus)}"
          memory: ${32 * Number(gpus)}Gi
          nvidia.com/gpu: "${gpus}"
      volumeMounts:
        - name: cache
          mountPath: /cache
        - name: dshm
          mountPath: /dev/shm
  volumes:
    - name: cache
      persistentVolumeClaim:
        claimName: cache-${team}
    - name: dshm
      emptyDir:
        medium: Memory
        sizeLimit: 16Gi
`;
}

function replica(i: number, gpus: string, args: string): string {
  return `      restartPolicy: OnFailure
      template:
        metadata:
          labels:
            app.kubernetes.io/part-of: llm-${i}
        spec:
          containers:
            - name: pytorch
              image: ${pick(IMAGES, i + 1)}
              args: [${args}]
              env:
                - name: NCCL_IB_DISABLE
                  value: "0"
                - name: TORCH_DISTRIBUTED_DEBUG
                  value: DETAIL
              resources:
                limits:
                  cpu: "${8 * Number(gpus)}"
                  memory: ${64 * Number(gpus)}Gi
                  nvidia.com/gpu: "${gpus}"
              volumeMounts:
                - name: dshm
                  mountPath: /dev/shm
          volumes:
            - name: dshm
              emptyDir:
                medium: Memory
`;
}

function pytorchJob(i: number): string {
  const gpus = pick(GPUS, i >> 2);
  return `apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: llm-pretrain-${i}
  namespace: ${pick(TEAMS, i)}
  labels:
    experiment: exp-${i % 211}
spec:
  runPolicy:
    cleanPodPolicy: None
    backoffLimit: 3
  pytorchReplicaSpecs:
    Master:
      replicas: 1
${replica(i, gpus, `"--config", "configs/llm-${i % 13}.yaml", "--rank", "0"`)}    Worker:
      replicas: ${1 + (i % 7)}
${replica(i, gpus, `"--config", "configs/llm-${i % 13}.yaml"`)}`;
}

function deployment(i: number): string {
  const gpu = i % 3 !== 0;
  return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: inference-${i}
  namespace: ${pick(TEAMS, i)}
  labels:
    app: inference-${i}
spec:
  replicas: ${1 + (i % 4)}
  selector:
    matchLabels:
      app: inference-${i}
  template:
    metadata:
      labels:
        app: inference-${i}
    spec:
      containers:
        - name: server
          image: ${pick(IMAGES, i + 3)}
          args: ["--model-repository=/models", "--http-port=8000"]
          ports:
            - containerPort: 8000
              name: http
          readinessProbe:
            httpGet:
              path: /v2/health/ready
              port: http
            periodSeconds: 5
          resources:
            requests:
              cpu: "2"
              memory: 8Gi
            limits:
              memory: 16Gi${gpu ? `\n              nvidia.com/gpu: "1"` : ""}
`;
}

/** BIG.yaml in `dir`: documents in the mix 5 pods : 2 PyTorchJobs : 3 Deployments until TARGET_BYTES. */
function generate(file: string): number {
  let bytes = 0;
  let docs = 0;
  const chunks: string[] = [];
  while (bytes < TARGET_BYTES) {
    const slot = docs % 10;
    const doc = slot < 5 ? gpuPod(docs) : slot < 7 ? pytorchJob(docs) : deployment(docs);
    const text = `---\n${doc}`;
    chunks.push(text);
    bytes += Buffer.byteLength(text);
    docs++;
  }
  writeFileSync(file, chunks.join(""));
  return docs;
}

const seconds = (start: bigint): number => Number(process.hrtime.bigint() - start) / 1e9;

function timeYamlAlone(text: string): { plain: number; streamed: number; asCli: number } {
  let plain = Infinity;
  for (let r = 0; r < 2; r++) {
    const t = process.hrtime.bigint();
    const docs = parseAllDocuments(text);
    plain = Math.min(plain, seconds(t));
    if ((docs as unknown[]).length === 0) throw new Error("no documents parsed");
  }
  let t = process.hrtime.bigint();
  let docs = 0;
  for (const d of new Composer().compose(new Parser(new LineCounter().addNewLine).parse(text))) if (d.contents) docs++;
  const streamed = seconds(t);
  t = process.hrtime.bigint();
  let n = 0;
  for (const d of parseManifestDocuments(text, new LineCounter())) if (d.toJS({ maxAliasCount: -1 })) n++;
  const asCli = seconds(t);
  if (n === 0 || docs === 0) throw new Error("no documents");
  return { plain, streamed, asCli };
}

async function runCli(file: string, dir: string): Promise<{ wall: number; rssMb: number; code: number | null; stdoutFile: string; stderr: string }> {
  const rusage = join(dir, "rusage.json");
  const stdoutFile = join(dir, "out.yaml");
  const stderrFile = join(dir, "err.txt");
  const out = openSync(stdoutFile, "w");
  const err = openSync(stderrFile, "w");
  const t = process.hrtime.bigint();
  const child = spawn(process.execPath, ["--import", join(ROOT, "bench/lib/rusage-at-exit.mjs"), join(ROOT, "bin/quartermaster.js"), "admit", "-f", file], {
    cwd: dir,
    env: { ...process.env, QM_RUSAGE_FILE: rusage },
    stdio: ["ignore", out, err],
  });
  const code = await new Promise<number | null>((res) => child.on("exit", (c) => res(c)));
  const wall = seconds(t);
  closeSync(out);
  closeSync(err);
  const { maxRssKiB } = JSON.parse(readFileSync(rusage, "utf8")) as { maxRssKiB: number };
  return { wall, rssMb: maxRssKiB / 1024, code, stdoutFile, stderr: readFileSync(stderrFile, "utf8") };
}

const dir = mkdtempSync(join(tmpdir(), "qm-admit-large-"));
try {
  const file = join(dir, "BIG.yaml");
  const docs = generate(file);
  const mb = statSync(file).size / 1024 / 1024;
  console.log(`input: ${file}, ${mb.toFixed(1)} MB, ${docs.toLocaleString("en-US")} documents (5 GPU pods : 2 PyTorchJobs : 3 Deployments)`);

  const text = readFileSync(file, "utf8");
  const yamlAlone = timeYamlAlone(text);
  console.log(`yaml parseAllDocuments alone (defaults, best of 2): ${yamlAlone.plain.toFixed(2)} s`);
  console.log(`yaml Parser + Composer, one document at a time:       ${yamlAlone.streamed.toFixed(2)} s (for reference)`);
  console.log(`yaml as the CLI reads (YAML 1.1, merge keys) + toJS:  ${yamlAlone.asCli.toFixed(2)} s (for reference)`);

  const cli = await runCli(file, dir);
  const ratio = cli.wall / yamlAlone.plain;
  const progress = cli.stderr.split("\n").filter((l) => l.startsWith("quartermaster: admit:"));
  const summary = cli.stderr.trimEnd().split("\n").at(-1) ?? "";
  const outDocs = (readFileSync(cli.stdoutFile, "utf8").match(/^---$/gm) ?? []).length + 1;
  console.log(`quartermaster admit -f BIG.yaml: ${cli.wall.toFixed(2)} s wall, peak RSS ${cli.rssMb.toFixed(0)} MB, exit ${cli.code}`);
  console.log(`  stderr's last line: ${summary}`);
  console.log(`  progress lines on stderr: ${progress.length}${progress.length ? `, first "${progress[0]}", last "${progress.at(-1)}"` : ""}`);
  console.log(`  documents on stdout: ${outDocs.toLocaleString("en-US")} (inputs ${docs.toLocaleString("en-US")})`);
  const mark = (ok: boolean): string => (ok ? "PASS" : "FAIL");
  console.log(
    `${mark(ratio <= MAX_RATIO)} time: ${ratio.toFixed(2)}× the yaml package's parseAllDocuments alone (target ≤ ${MAX_RATIO}×); ${(cli.wall / yamlAlone.streamed).toFixed(2)}× its streamed parse`,
  );
  console.log(`${mark(cli.rssMb < MAX_RSS_MB)} memory: peak RSS ${cli.rssMb.toFixed(0)} MB (target < ${MAX_RSS_MB} MB)`);
  console.log(`${mark(outDocs === docs)} output: one document per input object`);
  process.exitCode = ratio <= MAX_RATIO && cli.rssMb < MAX_RSS_MB && outDocs === docs ? 0 : 1;
} finally {
  if (values.keep) console.log(`kept ${dir}`);
  else rmSync(dir, { recursive: true, force: true });
}
