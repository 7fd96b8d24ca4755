/**
 * Trimmed informers (`src/kube/informer.ts`): client-node's ListWatch fed by a paged, trimmed LIST and trimmed
 * watch events, with an index by controller uid. The watch is a stand-in that hands events to the test.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import * as k8s from "@kubernetes/client-node";
import { slimPod } from "../../../src/kube/cluster.js";
import { slimJob, trimmedInformer, type ListPage } from "../../../src/kube/informer.js";

type Obj = Record<string, any>;
type Handler = (phase: string, obj: object) => void;

const pod = (name: string, rv: string, owner?: string, extra: Obj = {}): Obj => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name,
    namespace: "ns",
    uid: `uid-${name}`,
    resourceVersion: rv,
    managedFields: [{ manager: "kubelet", operation: "Update", fieldsV1: { "f:status": {} } }],
    annotations: { big: "x".repeat(1000) },
    ...(owner ? { ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", name: owner, uid: owner, controller: true }] } : {}),
  },
  spec: { containers: [{ name: "c", image: "i", env: [{ name: "A", value: "1" }] }], volumes: [{ name: "v", emptyDir: {} }] },
  status: { phase: "Running", podIP: "10.0.0.1" },
  ...extra,
});

/** The informer over `pages` with a watch the test drives; `queries` records the watch's query parameters. */
function setUp(pages: Array<ListPage | Error | Promise<ListPage>>, extra: { onRelist?: () => void } = {}) {
  const asked: Array<string | undefined> = [];
  const queries: Obj[] = [];
  let handler: Handler | undefined;
  let done: ((err: unknown) => void) | undefined;
  class FakeWatch extends k8s.Watch {
    override watch(_path: string, qp: Obj, cb: Handler, end: (err: unknown) => void): Promise<AbortController> {
      queries.push(qp);
      handler = cb;
      done = end;
      return Promise.resolve(new AbortController());
    }
  }
  const kc = new k8s.KubeConfig();
  const informer = trimmedInformer({ ...k8s, Watch: FakeWatch }, kc, {
    path: "/api/v1/pods",
    page: (cont) => {
      asked.push(cont);
      const page = pages[asked.length - 1]!;
      return page instanceof Error ? Promise.reject(page) : page instanceof Promise ? page : Promise.resolve(page);
    },
    trim: (o) => slimPod(o),
    indexByController: true,
    ...extra,
  });
  const send = (phase: string, obj: object): void => handler!(phase, obj);
  /** Ends the watch as the apiserver would (410 Gone: ListWatch lists again). */
  const end = (err: unknown): Promise<void> => Promise.resolve(done!(err));
  return { informer, asked, queries, send, end };
}

const names = (objs: readonly { metadata?: { name?: string } }[]): string[] => objs.map((o) => o.metadata!.name!).sort();

describe("trimmed informer", () => {
  it("lists page by page, caches trimmed objects with their resourceVersion, and watches from the list's", async () => {
    const { informer, asked, queries } = setUp([
      { metadata: { resourceVersion: "100", _continue: "c1" }, items: [pod("a", "90", "job-1"), pod("b", "91", "job-1")] },
      { metadata: { resourceVersion: "100" }, items: [pod("c", "95", "job-2")] },
    ]);
    await informer.start();
    assert.deepEqual(asked, [undefined, "c1"]);
    assert.deepEqual(names(informer.list()), ["a", "b", "c"]);
    const a = informer.get("a", "ns") as Obj;
    assert.equal(a.metadata.resourceVersion, "90");
    assert.equal(a.metadata.managedFields, undefined, "managedFields trimmed");
    assert.equal(a.metadata.annotations, undefined, "annotations trimmed");
    assert.equal(a.spec.volumes, undefined, "volumes trimmed");
    assert.equal(a.status.phase, "Running");
    assert.equal(queries[0]!.resourceVersion, "100");
    assert.equal(queries[0]!.allowWatchBookmarks, true);
  });

  it("trims watch events, tells an update by its resourceVersion, and passes bookmarks through", async () => {
    const { informer, send } = setUp([{ metadata: { resourceVersion: "1" }, items: [] }]);
    const seen: string[] = [];
    informer.on("add", (o) => seen.push(`add ${(o as Obj).metadata.name}`));
    informer.on("update", (o) => seen.push(`update ${(o as Obj).metadata.name}`));
    await informer.start();
    send("ADDED", pod("a", "2"));
    send("MODIFIED", pod("a", "2"));
    send("MODIFIED", pod("a", "3", undefined, { status: { phase: "Succeeded" } }));
    send("BOOKMARK", { kind: "Pod", metadata: { resourceVersion: "9" } });
    assert.deepEqual(seen, ["add a", "update a"], "the repeat of rv 2 is no update");
    const a = informer.get("a", "ns") as Obj;
    assert.equal(a.status.phase, "Succeeded");
    assert.equal(a.metadata.managedFields, undefined);
    assert.equal(informer.latestResourceVersion(), "9");
  });

  it("synced(): false until a LIST's items are in the cache, false while a relist fails, true again after one succeeds", async () => {
    const gone = Object.assign(new Error("Gone"), { statusCode: 410 });
    const notFound = Object.assign(new Error("Not Found"), { code: 404 });
    const { informer, end } = setUp([
      { metadata: { resourceVersion: "1" }, items: [pod("a", "1")] },
      notFound,
      { metadata: { resourceVersion: "5" }, items: [pod("a", "1"), pod("b", "4")] },
    ]);
    const errors: unknown[] = [];
    informer.on("error", (e) => errors.push(e));
    assert.equal(informer.synced(), false, "before the first LIST");
    await informer.start();
    assert.equal(informer.synced(), true);
    assert.deepEqual(names(informer.list()), ["a"]);
    await end(gone);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(errors, [notFound], "the relist failed");
    assert.equal(informer.synced(), false, "a cache whose relist failed is not whole");
    await informer.start();
    assert.equal(informer.synced(), true);
    assert.deepEqual(names(informer.list()), ["a", "b"]);
  });

  it("synced() stays true while a relist runs and after one that fails for a passing reason; onRelist says each relist", async () => {
    let release!: (p: ListPage) => void;
    const slow = new Promise<ListPage>((r) => (release = r));
    const gone = Object.assign(new Error("Gone"), { statusCode: 410 });
    const unavailable = Object.assign(new Error("Service Unavailable"), { code: 503 });
    const relists: string[] = [];
    const { informer, end } = setUp([{ metadata: { resourceVersion: "1" }, items: [pod("a", "1")] }, slow, unavailable], {
      onRelist: () => relists.push(`relist with ${names(informer.list()).join(",")}`),
    });
    informer.on("error", () => undefined);
    await informer.start();
    assert.deepEqual(relists, [], "the first LIST is no relist");
    void end(gone); // the relist starts and waits on `slow`
    await new Promise((r) => setImmediate(r));
    assert.equal(informer.synced(), true, "relisting: the cache still holds the last LIST");
    assert.deepEqual(names(informer.list()), ["a"]);
    release({ metadata: { resourceVersion: "7" }, items: [pod("a", "1"), pod("b", "6")] });
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(names(informer.list()), ["a", "b"]);
    void end(gone); // the next relist fails with a 503
    await new Promise((r) => setImmediate(r));
    assert.equal(informer.synced(), true, "a passing failure: the cache is still whole");
    assert.deepEqual(relists, ["relist with a", "relist with a,b"]);
  });

  it("synced() is false once the watch says the kind is gone (404)", async () => {
    const notFound = Object.assign(new Error("Not Found"), { code: 404 });
    const { informer, end } = setUp([{ metadata: { resourceVersion: "1" }, items: [pod("a", "1")] }]);
    informer.on("error", () => undefined);
    await informer.start();
    assert.equal(informer.synced(), true);
    await end(notFound);
    assert.equal(informer.synced(), false);
  });

  it("watches ask for a timeout of 5 to 10 minutes (a silent watch is replaced)", async () => {
    const { informer, queries } = setUp([{ metadata: { resourceVersion: "1" }, items: [] }]);
    await informer.start();
    const t = Number(queries[0]!.timeoutSeconds);
    assert.ok(t >= 300 && t <= 600, `timeoutSeconds ${t}`);
  });

  it("a watch that does not answer within firstResponseMs ends through the error handlers, never as a rejection", async () => {
    // ListWatch awaits watch() inside its done handler, which nobody awaits: a rejection there ends the process.
    let answer: ((c: AbortController) => void) | undefined;
    class SilentWatch extends k8s.Watch {
      override watch(): Promise<AbortController> {
        return new Promise((r) => (answer = r));
      }
    }
    const informer = trimmedInformer({ ...k8s, Watch: SilentWatch }, new k8s.KubeConfig(), {
      path: "/api/v1/pods",
      page: () => Promise.resolve({ metadata: { resourceVersion: "1" }, items: [pod("a", "1")] }),
      trim: (o) => slimPod(o),
      firstResponseMs: 30,
    });
    const errors: unknown[] = [];
    informer.on("error", (err) => errors.push(err));
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown): void => void unhandled.push(err);
    process.on("unhandledRejection", onUnhandled);
    try {
      // The deadline's timer is unref'd (it must not hold a process open); here nothing else would.
      const hold = setTimeout(() => undefined, 5000);
      await informer.start();
      clearTimeout(hold);
      await new Promise((r) => setTimeout(r, 60));
      assert.equal(errors.length, 1);
      assert.match(String(errors[0]), /did not answer within/);
      const late = new AbortController();
      answer!(late);
      await new Promise((r) => setImmediate(r));
      assert.ok(late.signal.aborted, "the late answer is aborted");
      assert.deepEqual(unhandled, []);
      assert.deepEqual(names(informer.list()), ["a"], "the cache keeps the LIST");
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("indexes by controller uid through adoption, release and deletion", async () => {
    const { informer, send } = setUp([{ metadata: { resourceVersion: "1" }, items: [pod("a", "1", "job-1"), pod("b", "1")] }]);
    await informer.start();
    assert.deepEqual(names(informer.byController("job-1")), ["a"]);
    send("MODIFIED", pod("b", "2", "job-1")); // adopted
    assert.deepEqual(names(informer.byController("job-1")), ["a", "b"]);
    send("MODIFIED", pod("a", "2", "job-2")); // moved to another controller
    assert.deepEqual(names(informer.byController("job-1")), ["b"]);
    assert.deepEqual(names(informer.byController("job-2")), ["a"]);
    send("MODIFIED", pod("b", "3")); // released
    assert.deepEqual(informer.byController("job-1"), []);
    send("DELETED", pod("a", "4", "job-2"));
    assert.deepEqual(informer.byController("job-2"), []);
    assert.deepEqual(informer.byController("nobody"), []);
  });
});

describe("slimJob", () => {
  it("drops managedFields and kubectl's last-applied copy, keeps spec, status and other annotations", () => {
    const job = {
      apiVersion: "kubeflow.org/v1",
      kind: "PyTorchJob",
      metadata: {
        name: "j",
        namespace: "ns",
        uid: "u",
        resourceVersion: "7",
        managedFields: [{ manager: "kubectl" }],
        annotations: { "kubectl.kubernetes.io/last-applied-configuration": "{...}", "quartermaster.dev/ttl-seconds-after-finished": "60" },
      },
      spec: { runPolicy: { ttlSecondsAfterFinished: 60 } },
      status: { conditions: [{ type: "Succeeded", status: "True" }] },
    };
    assert.deepEqual(slimJob(job), {
      apiVersion: "kubeflow.org/v1",
      kind: "PyTorchJob",
      metadata: { name: "j", namespace: "ns", uid: "u", resourceVersion: "7", annotations: { "quartermaster.dev/ttl-seconds-after-finished": "60" } },
      spec: { runPolicy: { ttlSecondsAfterFinished: 60 } },
      status: { conditions: [{ type: "Succeeded", status: "True" }] },
    });
    assert.deepEqual(slimJob({ metadata: { name: "x", annotations: { "kubectl.kubernetes.io/last-applied-configuration": "{}" } } }), {
      metadata: { name: "x" },
    });
  });
});
