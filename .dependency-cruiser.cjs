/**
 * Which module may import which (docs/architecture.md, "Layers"), checked by dependency-cruiser in `npm test`
 * (`npm run lint:deps`; test/unit/project/layers.test.ts shows each kind of forbidden edge failing).
 *
 * The rooms, each with the rooms it may import (besides itself); any other edge between our modules fails CI with
 * the rule `<room>-imports` naming what it may import. Siblings never import each other: admission, mutate and
 * validate (the webhooks' decisions) share only what lies below them; reconcile, manifests, migrate and explain (what
 * is built over those decisions) likewise. Every file in src/, webhooks/, bin/ and the test and bench helpers has a
 * room; a new folder needs one here.
 */
const BOTTOM = ["vendors", "core", "certs"];
const MODEL = ["kinds", "policy", "kueue", "membership", "ledger"];
const DECISIONS = ["admission", "mutate", "validate"];
const VIEWS = ["reconcile", "manifests", "migrate", "explain"];

const ROOMS = {
  // What a GPU is, per vendor, as data (src/vendors/index.ts): below everything that counts GPUs.
  vendors: { paths: ["src/vendors/"], may: [] },
  // The shared vocabulary: Kubernetes object types, keys, quantities, selectors, scope, what counts as a GPU,
  // violations. The generated ajv validators import nothing of ours (their generator, generate.ts, is a build script).
  core: { paths: ["src/core/", "src/generated/[a-z-]+-validator\\.ts$"], may: ["vendors"] },
  // Certificate arithmetic and the plans of `certs ensure`/`certs generate` (node:crypto only; the Secret and webhook
  // I/O is src/kube/certs.ts): the doctor's checks share it.
  certs: { paths: ["src/certs/"], may: [] },
  // The model: the shapes of the training-job kinds and their frameworks (src/kinds), the policy, Kueue's queues and
  // admission as a job carries it (src/kueue), which job a pod belongs to (src/membership), the GPU ledger's contents
  // and format (src/ledger). Pure.
  kinds: { paths: ["src/kinds/"], may: ["core", "vendors"] },
  // The built-in policy, generated from the schema's defaults (src/generated/default-policy.ts), is the policy's.
  policy: { paths: ["src/policy/", "src/generated/default-policy\\.ts$"], may: ["core", "vendors", "kinds"] },
  kueue: { paths: ["src/kueue/"], may: ["core", "kinds", "policy"] },
  membership: { paths: ["src/membership/"], may: ["core", "vendors", "kinds", "policy"] },
  ledger: { paths: ["src/ledger/"], may: ["core", "vendors", "kinds", "policy", "kueue"] },
  // The webhooks' decisions, pure, siblings: a review's reads and answer (admission), the pod and job mutations
  // (mutate), the rules (validate).
  admission: { paths: ["src/admission/"], may: [...BOTTOM, ...MODEL] },
  mutate: { paths: ["src/mutate/"], may: [...BOTTOM, ...MODEL] },
  validate: { paths: ["src/validate/"], may: [...BOTTOM, ...MODEL] },
  // Built over the decisions, pure, siblings: the reconciler's plans, the rendered manifests (webhook configurations,
  // RBAC, the chart, CEL), `migrate`, and `explain`'s verdict.
  reconcile: { paths: ["src/reconcile/"], may: [...BOTTOM, ...MODEL, ...DECISIONS] },
  manifests: { paths: ["src/manifests/"], may: [...BOTTOM, ...MODEL, ...DECISIONS] },
  migrate: { paths: ["src/migrate/"], may: [...BOTTOM, ...MODEL, ...DECISIONS] },
  explain: { paths: ["src/explain/"], may: [...BOTTOM, ...MODEL, ...DECISIONS] },
  // `doctor` compares the cluster with what the manifests render and the rules decide: above both.
  doctor: { paths: ["src/doctor/"], may: [...BOTTOM, ...MODEL, ...DECISIONS, "manifests"] },
  // I/O from here up. The Kubernetes API client (reads, writes, informers, the ledger's ConfigMaps, the Event writer,
  // the certificate store): below the decisions, it implements the interfaces they declare by shape, not by import.
  kube: { paths: ["src/kube/"], may: [...BOTTOM, ...MODEL] },
  // The drivers: they run the pure plans (reconcile, doctor, explain, the capacity rules) against the client.
  run: { paths: ["src/run/"], may: [...BOTTOM, ...MODEL, ...DECISIONS, ...VIEWS, "doctor", "kube"] },
  // The HTTPS and metrics listeners: requests to the decisions, and the ledger's gauges (src/reconcile/metrics.ts).
  server: { paths: ["src/server/"], may: [...BOTTOM, ...MODEL, ...DECISIONS, "reconcile"] },
  // The wiring of each webhook (webhooks/): which rules, which reads, which answer.
  webhooks: { paths: ["webhooks/"], may: [...BOTTOM, ...MODEL, ...DECISIONS, ...VIEWS, "kube", "run", "server"] },
  // Entry points and composition roots: the commands (src/cli, with the process entry point src/cli/main.ts), the
  // logger, the generator, bin/.
  cli: {
    paths: ["src/cli/", "src/log\\.ts$", "src/generated/generate\\.ts$", "bin/"],
    may: [...BOTTOM, ...MODEL, ...DECISIONS, ...VIEWS, "doctor", "kube", "run", "server", "webhooks"],
  },
  // Tests' and benchmarks' helpers use anything (their own imports are checked for circles).
  harness: { paths: ["test/", "bench/"], may: null },
};

const anyOf = (paths) => `^(${paths.join("|")})`;
const OURS = "^(src|webhooks|bin|test|bench)/";

const roomRules = Object.entries(ROOMS)
  .filter(([, room]) => room.may !== null)
  .map(([name, room]) => ({
    name: `${name}-imports`,
    comment: `${name} may import ${room.may.join(", ") || "nothing of ours"} (docs/architecture.md, "Layers")`,
    severity: "error",
    from: { path: anyOf(room.paths) },
    to: { path: OURS, pathNot: anyOf([...room.paths, ...room.may.flatMap((m) => ROOMS[m].paths)]) },
  }));

module.exports = {
  forbidden: [
    ...roomRules,
    {
      name: "no-circular",
      comment: "no two modules import each other, directly or through others",
      severity: "error",
      from: { path: OURS },
      to: { circular: true },
    },
    {
      name: "every-module-in-a-layer",
      comment: "a new folder or a file at the top of src/ needs a room in ROOMS (.dependency-cruiser.cjs)",
      severity: "error",
      from: { path: OURS, pathNot: anyOf(Object.values(ROOMS).flatMap((r) => r.paths)) },
      to: {},
    },
  ],
  options: {
    // Type-only imports count: a type from above is still an upward dependency.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^(node_modules|dist)/" },
  },
};

// For the picture in docs/architecture.md (test/tools/layers-picture.ts); not enumerable, so not part of the
// configuration dependency-cruiser reads.
Object.defineProperty(module.exports, "ROOMS", { value: ROOMS, enumerable: false });
