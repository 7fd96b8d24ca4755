/**
 * The layer check (.dependency-cruiser.cjs, `npm run lint:deps` in `npm test`): src/ as it is passes, and each
 * kind of import against the direction fails with the name of the rule it broke. The failing cases cruise a
 * small tree in a temporary directory laid out like src/ (the rules match paths from `src/`), so the real tree
 * is never touched.
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { cruise, type ICruiseOptions, type IReporterOutput } from "dependency-cruiser";

const ROOT = join(import.meta.dirname, "../../..");
const config = createRequire(import.meta.url)(join(ROOT, ".dependency-cruiser.cjs")) as {
  forbidden: ICruiseOptions["ruleSet"] extends { forbidden?: infer F } ? F : never;
  options: Record<string, unknown>;
};

/** The names of the rules `files` (relative to `base`) break. */
async function broken(files: string[], base: string, tsConfig?: string): Promise<string[]> {
  const cwd = process.cwd();
  process.chdir(base);
  try {
    const result = (await cruise(files, {
      ruleSet: { forbidden: config.forbidden },
      tsPreCompilationDeps: true,
      ...(tsConfig ? { tsConfig: { fileName: tsConfig } } : {}),
      doNotFollow: { path: "node_modules" },
      exclude: { path: "^(node_modules|dist)/" },
      validate: true,
    } as ICruiseOptions)) as IReporterOutput;
    const output = result.output as { summary: { violations: Array<{ rule: { name: string }; from: string; to: string }> } };
    return output.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`).sort();
  } finally {
    process.chdir(cwd);
  }
}

describe("the layer check (.dependency-cruiser.cjs)", () => {
  it("src/, webhooks/, bin/ and the test and bench helpers break no rule", async () => {
    assert.deepEqual(await broken(["src", "webhooks", "bin", "test", "bench"], ROOT, join(ROOT, "tsconfig.json")), []);
  });

  const tmp = mkdtempSync(join(tmpdir(), "qm-layers-"));
  after(() => rmSync(tmp, { recursive: true, force: true }));
  /** A tree of `files` (path → source) under a fresh directory; returns it. */
  const tree = (name: string, files: Record<string, string>): string => {
    const dir = join(tmp, name);
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    return dir;
  };

  const CASES: Array<{ name: string; files: Record<string, string>; want: string[] }> = [
    {
      name: "core imports the Kubernetes client wrapper (kube)",
      files: { "src/core/gpu.ts": 'import { x } from "../kube/client.ts";\nexport const y = x;\n', "src/kube/client.ts": "export const x = 1;\n" },
      want: ["core-imports: src/core/gpu.ts → src/kube/client.ts"],
    },
    {
      name: "a mutation imports a validation rule (siblings: mutate and validate share only what lies below)",
      files: {
        "src/mutate/pod.ts": 'import { x } from "../validate/pod-spec.ts";\nexport const y = x;\n',
        "src/validate/pod-spec.ts": "export const x = 1;\n",
      },
      want: ["mutate-imports: src/mutate/pod.ts → src/validate/pod-spec.ts"],
    },
    {
      name: "a type-only import from above counts too",
      files: {
        "src/policy/types.ts": 'import type { X } from "../reconcile/plan.ts";\nexport type Y = X;\n',
        "src/reconcile/plan.ts": "export type X = number;\nexport const z = 1;\n",
      },
      want: ["policy-imports: src/policy/types.ts → src/reconcile/plan.ts"],
    },
    {
      name: "the reconciler imports the server's metrics",
      files: { "src/reconcile/loop.ts": 'import { m } from "../server/metrics.ts";\nexport const y = m;\n', "src/server/metrics.ts": "export const m = 1;\n" },
      want: ["reconcile-imports: src/reconcile/loop.ts → src/server/metrics.ts"],
    },
    {
      name: "a validation rule imports a mutation (the other way round, also a sibling edge)",
      files: {
        "src/validate/job.ts": 'import { x } from "../mutate/frameworks.ts";\nexport const y = x;\n',
        "src/mutate/frameworks.ts": "export const x = 1;\n",
      },
      want: ["validate-imports: src/validate/job.ts → src/mutate/frameworks.ts"],
    },
    {
      name: "explain's verdict imports the reconciler's Events (siblings built over the decisions)",
      files: {
        "src/explain/verdict.ts": 'import { x } from "../reconcile/events.ts";\nexport const y = x;\n',
        "src/reconcile/events.ts": "export const x = 1;\n",
      },
      want: ["explain-imports: src/explain/verdict.ts → src/reconcile/events.ts"],
    },
    {
      name: "a webhook's wiring imports a command (webhooks/ sits below the entry points)",
      files: {
        "webhooks/validate-jobs.ts": 'import { x } from "../src/cli/commands.ts";\nexport const y = x;\n',
        "src/cli/commands.ts": "export const x = 1;\n",
      },
      want: ["webhooks-imports: webhooks/validate-jobs.ts → src/cli/commands.ts"],
    },
    {
      name: "the pure ledger imports the API client",
      files: { "src/ledger/compute.ts": 'import { x } from "../kube/client.ts";\nexport const y = x;\n', "src/kube/client.ts": "export const x = 1;\n" },
      want: ["ledger-imports: src/ledger/compute.ts → src/kube/client.ts"],
    },
    {
      name: "the API client imports a reconciler plan (the client sits below the decisions; drivers are src/run)",
      files: { "src/kube/cluster.ts": 'import { x } from "../reconcile/plan.ts";\nexport const y = x;\n', "src/reconcile/plan.ts": "export const x = 1;\n" },
      want: ["kube-imports: src/kube/cluster.ts → src/reconcile/plan.ts"],
    },
    {
      name: "the API client imports a driver",
      files: { "src/kube/cluster.ts": 'import { x } from "../run/pass.ts";\nexport const y = x;\n', "src/run/pass.ts": "export const x = 1;\n" },
      want: ["kube-imports: src/kube/cluster.ts → src/run/pass.ts"],
    },
    {
      name: "two modules of one folder import each other",
      files: {
        "src/cli/a.ts": 'import { b } from "./b.ts";\nexport const a = b;\n',
        "src/cli/b.ts": 'import { a } from "./a.ts";\nexport const b = () => a;\n',
      },
      // dependency-cruiser reports a cycle once, at the first module it meets on it.
      want: ["no-circular: src/cli/a.ts → src/cli/b.ts"],
    },
    {
      name: "a new top-level folder with no place in the layers",
      files: { "src/extras/x.ts": 'import { k } from "../core/keys.ts";\nexport const x = k;\n', "src/core/keys.ts": "export const k = 1;\n" },
      want: ["every-module-in-a-layer: src/extras/x.ts → src/core/keys.ts"],
    },
    {
      name: "downward imports are fine",
      files: {
        "src/server/app.ts": 'import { x } from "../mutate/pod.ts";\nimport { k } from "../core/keys.ts";\nexport const y = x + k;\n',
        "src/mutate/pod.ts": 'import { k } from "../core/keys.ts";\nexport const x = k;\n',
        "src/core/keys.ts": "export const k = 1;\n",
      },
      want: [],
    },
  ];
  for (const c of CASES) {
    it(`${c.want.length > 0 ? "fails" : "passes"}: ${c.name}`, async () => {
      const dir = tree(c.name.replace(/\W+/g, "-"), c.files);
      assert.deepEqual(
        await broken(
          ["src", "webhooks"].filter((d) => existsSync(join(dir, d))),
          dir,
        ),
        c.want,
      );
    });
  }
});
