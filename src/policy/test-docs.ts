/**
 * @module
 * The "Trying and testing a policy change" section of docs/policy.md (appended by src/policy/docs.ts): how
 * `admit` and `test` are used, and the test file's fields, generated from {@link POLICY_TEST_SCHEMA} so the
 * table cannot drift from what `quartermaster test` accepts.
 */
import { POLICY_TEST_SCHEMA } from "./test-schema.js";

type Node = {
  type?: string | readonly string[];
  const?: unknown;
  description?: string;
  default?: unknown;
  items?: Node;
  properties?: Record<string, Node>;
  additionalProperties?: boolean | Node;
  required?: readonly string[];
};

function typeOf(n: Node): string {
  if (n.const !== undefined) return `\`${String(n.const)}\``;
  if (n.type === "array") return `list of ${n.items?.type === "object" ? "objects" : `${String(n.items?.type ?? "values")}s`}`;
  if (Array.isArray(n.type)) return n.type.join(" or ");
  if (n.type === "object" && typeof n.additionalProperties === "object") return "map";
  return String(n.type ?? "value");
}

function rows(props: Record<string, Node>, required: readonly string[], prefix: string): string[] {
  const out: string[] = [];
  for (const [name, n] of Object.entries(props)) {
    const path = `${prefix}${name}`;
    const req = required.includes(name) ? "required" : n.default !== undefined ? `default \`${String(n.default)}\`` : "optional";
    out.push(`| \`${path}\` | ${typeOf(n)} | ${req} | ${(n.description ?? "").replaceAll("|", "\\|")} |`);
    if (n.type === "array" && n.items?.properties) out.push(...rows(n.items.properties, n.items.required ?? [], `${path}[].`));
  }
  return out;
}

/** Trying a change with `admit`, testing it with `quartermaster test`: the prose and examples above the field table. */
const TRY_AND_TEST: readonly string[] = [
  "## Trying and testing a policy change",
  "",
  "A policy change can be tried on the objects teams submit, and pinned down in tests, before it reaches a cluster.",
  "Both run the objects through the same mutating and validating webhooks as the server, with no cluster: a training",
  "job among the inputs is what its pods' job lookup finds (the webhook reads it from the apiserver), and a pod's requests",
  "default to its limits as the apiserver defaults them before the webhooks see it. The namespace is taken to be opted",
  "in, and the request to match the webhook configurations' `matchConditions`. `test/e2e/admit.test.ts` holds `admit`",
  "to a real kube-apiserver with the webhooks registered: same verdicts, same violations, same outfitting.",
  "",
  "**Try it** with `quartermaster admit`: the outfitted objects on stdout (`-o yaml`, `json` or `patch`), every warning",
  "and violation with its field path on stderr, exit 1 when anything is denied. Pods, pod templates in Deployments,",
  "StatefulSets, Jobs, CronJobs and the like (admitted as the pods they stamp out; a violation's path is the template's),",
  "and training jobs (`--pods` also admits each replica pod as the training operator creates it):",
  "",
  "```console",
  "$ cat my-policy.yaml",
  "limits:",
  "  container:",
  "    gpus:",
  "      nvidia.com/gpu: 4",
  "$ quartermaster admit -f examples/policy-tests/resources/pods.yaml --policy my-policy.yaml > outfitted.yaml",
  "Pod team-a/one-gpu (examples/policy-tests/resources/pods.yaml#1): allowed, outfitted (3 patch operations)",
  "  warning: quartermaster: resource requests/limits defaulted for main",
  "  warning: quartermaster: added tolerations for nvidia.com/gpu",
  "Pod team-a/eight-gpus (examples/policy-tests/resources/pods.yaml#2): DENIED by container-limits",
  "  ...",
  "  violation [container-limits] spec.containers[0].resources.limits[nvidia.com/gpu]: 8 exceeds the per-container limit of 4",
  "...",
  "4 objects: 3 allowed, 1 denied",
  "```",
  "",
  "**Test it** with `quartermaster test DIR`: every `*.test.yaml` under DIR holds `PolicyTest` documents (several per",
  "file, `---` between them) naming resources, a policy, and what must come of each object; the result is a pass/fail",
  "table and exit 1 when anything fails, as `kyverno test` and `gator verify` do. Run it in CI next to",
  "`quartermaster policy check`. `examples/policy-tests/` has tests of a limit, an accelerator list, the outfitting of GPU",
  "pods and a PyTorchJob's distributed environment:",
  "",
  "```yaml",
  "apiVersion: quartermaster.dev/v1alpha1",
  "kind: PolicyTest",
  "name: at most 4 GPUs per container",
  "policy: my-policy.yaml                 # relative to this file; default the built-in policy",
  "resources: [resources/pods.yaml, ../pytorchjob.yaml]",
  "namespace: team-a                      # for objects that name none",
  "expect:",
  "  - resource: Pod/eight-gpus           # Kind/name or Kind/namespace/name",
  "    deniedBy: [container-limits]",
  "    violations:",
  "      - field: spec.containers[0].resources.limits[nvidia.com/gpu]",
  "  - resource: Pod/one-gpu",
  "    allowed: true",
  "    tolerations: [{key: nvidia.com/gpu, operator: Exists}]",
  "  - resource: Pod/mnist-ddp-worker-1     # a replica of the PyTorchJob",
  "    env:",
  '      pytorch: {MASTER_ADDR: mnist-ddp-master-0, WORLD_SIZE: "3", RANK: "2"}',
  "```",
  "",
  "```console",
  "$ quartermaster test examples/policy-tests",
  "RESULT  TEST                                                                                      RESOURCE",
  "pass    examples/policy-tests/limits.test.yaml: team-a GPU and accelerator limits                 Pod/one-gpu",
  "pass    examples/policy-tests/limits.test.yaml: team-a GPU and accelerator limits                 Pod/eight-gpus",
  "...",
  "10 passed, 0 failed",
  "```",
  "",
  "A failed row lists what did not hold under it (`expected allowed, got denied by container-limits (...)`,",
  '`container pytorch: env RANK: expected "1", got "2"`); a test file that does not fit the format is reported with',
  "its file and field path (`limits.test.yaml: expect[0].allowed: must be boolean`).",
  "",
];

export function policyTestingDocs(): string {
  const schema: Node = POLICY_TEST_SCHEMA;
  const fields = rows(schema.properties!, schema.required ?? [], "");
  return [
    ...TRY_AND_TEST,
    "### Test file fields",
    "",
    "Lists match by containment: each expected toleration, violation or warning must match one of the object's, with the",
    "fields given (a warning: a substring); `affinity` must be contained in the pod's. `env`, `tolerations`, `affinity`,",
    "`nodeSelector`, `labels` and `annotations` are checked on a pod, or on the (first) pod template of a Deployment and",
    "the like; a training job's are checked on its replica pods.",
    "",
    "| field | type | | meaning |",
    "|---|---|---|---|",
    ...fields,
    "",
  ].join("\n");
}
