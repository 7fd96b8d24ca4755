/**
 * Which way imports run in src/ (docs/architecture.md, "Layers"), checked by dependency-cruiser in `npm test`
 * (`npm run lint:deps`; test/unit/layers.test.ts shows an upward import failing).
 *
 * The folders, bottom first. A module may import from its own folder and from folders below it, never from
 * one above: the next upward import fails CI with the name of the rule it broke, `<folder>-not-above`.
 */
const LAYERS = [
  // What a GPU is, per vendor, as data (src/vendors/index.ts): below everything that counts GPUs.
  { name: "vendors", paths: ["src/vendors/"] },
  // The shared vocabulary: Kubernetes object types, keys, quantities, selectors, scope, what counts as a GPU.
  // The generated ajv validators import nothing of ours (their generator, generate.ts, is a build script).
  { name: "core", paths: ["src/core/", "src/generated/[a-z-]+-validator\\.ts$"] },
  // The shapes of the training-job kinds, one adapter each (src/kinds/index.ts: KIND_SHAPES and the lookups):
  // model data like vendors, below the policy (whose schema lists their frameworks) and everything that reads jobs.
  { name: "kinds", paths: ["src/kinds/"] },
  // Certificate arithmetic and the plans of \`certs ensure\`/\`certs generate\` (node:crypto only; the Secret and
  // webhook I/O is src/kube/certs.ts): the doctor's checks share it.
  { name: "certs", paths: ["src/certs/"] },
  { name: "policy", paths: ["src/policy/"] },
  { name: "topology", paths: ["src/topology/"] },
  { name: "admission", paths: ["src/admission/"] },
  { name: "mutate", paths: ["src/mutate/"] },
  { name: "validate", paths: ["src/validate/"] },
  { name: "reconcile", paths: ["src/reconcile/"] },
  // Renders: webhook configurations, RBAC, the chart's templates, CEL.
  { name: "manifests", paths: ["src/manifests/"] },
  // \`quartermaster migrate\`: v1 training jobs rendered as Trainer v2 TrainJobs (pure).
  { name: "migrate", paths: ["src/migrate/"] },
  { name: "doctor", paths: ["src/doctor/"] },
  // \`quartermaster explain\`: why a job is not running, a pure verdict over an evidence snapshot (issue 49).
  { name: "explain", paths: ["src/explain/"] },
  // I/O from here up.
  { name: "kube", paths: ["src/kube/"] },
  { name: "server", paths: ["src/server/"] },
  // Entry points and composition roots.
  { name: "cli", paths: ["src/cli/", "src/log\\.ts$", "src/generated/generate\\.ts$"] },
];

const anyOf = (paths) => `^(${paths.join("|")})`;

const layerRules = LAYERS.slice(0, -1).map((layer, i) => ({
  name: `${layer.name}-not-above`,
  comment:
    `${layer.name} imports only from itself and ${
      LAYERS.slice(0, i)
        .map((l) => l.name)
        .join(", ") || "nothing of ours"
    }; ` +
    `it may not import ${LAYERS.slice(i + 1)
      .map((l) => l.name)
      .join(", ")} (docs/architecture.md, "Layers")`,
  severity: "error",
  from: { path: anyOf(layer.paths) },
  to: { path: anyOf(LAYERS.slice(i + 1).flatMap((l) => l.paths)) },
}));

module.exports = {
  forbidden: [
    ...layerRules,
    {
      name: "no-circular",
      comment: "no two modules import each other, directly or through others",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true },
    },
    {
      name: "every-module-in-a-layer",
      comment: "a new folder or a file at the top of src/ needs a place in LAYERS (.dependency-cruiser.cjs)",
      severity: "error",
      from: { path: "^src/", pathNot: anyOf(LAYERS.flatMap((l) => l.paths)) },
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
