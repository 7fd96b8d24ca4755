/**
 * assertKubeconfig: the configurations client-node's loadFromDefault would find, in its order, and
 * NoKubeconfigError (with the message that says what to do) when there is none.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { describe, it } from "node:test";
import { ClusterConnectionError, KubeconfigMissingError, NO_KUBECONFIG, NoKubeconfigError } from "../../../src/core/errors.js";
import { assertKubeconfig } from "../../../src/kube/client.js";

const emptyHome = (): string => mkdtempSync(join(tmpdir(), "qm-home-"));
const homeWithConfig = (): string => {
  const home = emptyHome();
  mkdirSync(join(home, ".kube"));
  writeFileSync(join(home, ".kube", "config"), "apiVersion: v1\nkind: Config\n");
  return home;
};

const existing = (): string => {
  const file = join(emptyHome(), "config");
  writeFileSync(file, "apiVersion: v1\nkind: Config\n");
  return file;
};

describe("assertKubeconfig", () => {
  const someFile = existing();
  const found: Array<[string, string | undefined, NodeJS.ProcessEnv, () => string]> = [
    ["--kubeconfig", someFile, {}, emptyHome],
    ["$KUBECONFIG", undefined, { KUBECONFIG: someFile }, emptyHome],
    ["$KUBECONFIG, two files", undefined, { KUBECONFIG: [someFile, existing()].join(delimiter) }, emptyHome],
    ["~/.kube/config", undefined, {}, homeWithConfig],
  ];
  for (const [name, file, env, home] of found) {
    it(`${name} → goes on`, () => assert.doesNotThrow(() => assertKubeconfig(file, env, home())));
  }

  it(
    "none of them and no ServiceAccount token → NoKubeconfigError saying what to do",
    { skip: process.env.KUBERNETES_SERVICE_HOST ? "running in a cluster" : false },
    () => {
      assert.throws(
        () => assertKubeconfig(undefined, {}, emptyHome()),
        (err: unknown) => err instanceof NoKubeconfigError && err instanceof ClusterConnectionError && (err as Error).message === NO_KUBECONFIG,
      );
      assert.equal(NO_KUBECONFIG, "no kubeconfig: set KUBECONFIG, pass --kubeconfig, or run in a cluster");
    },
  );

  // Issue 29 item 7: KUBECONFIG=/nonexistent printed client-node's bare "ENOENT: no such file or directory".
  const missing: Array<[string, string | undefined, NodeJS.ProcessEnv, string[], RegExp]> = [
    ["KUBECONFIG=/nonexistent", undefined, { KUBECONFIG: "/nonexistent" }, ["/nonexistent"], /KUBECONFIG environment variable, KUBECONFIG=\/nonexistent/],
    ["KUBECONFIG with one of two missing", undefined, { KUBECONFIG: [someFile, "/nonexistent/b"].join(delimiter) }, ["/nonexistent/b"], /KUBECONFIG/],
    [
      "KUBECONFIG with both missing",
      undefined,
      { KUBECONFIG: ["/nonexistent/a", "/nonexistent/b"].join(delimiter) },
      ["/nonexistent/a", "/nonexistent/b"],
      /KUBECONFIG/,
    ],
    ["--kubeconfig /nonexistent (even with a good $KUBECONFIG)", "/nonexistent", { KUBECONFIG: someFile }, ["/nonexistent"], /--kubeconfig/],
  ];
  for (const [name, file, env, files, source] of missing) {
    it(`${name} → KubeconfigMissingError naming ${files.join(", ")} and where it was named, not ENOENT`, () => {
      assert.throws(
        () => assertKubeconfig(file, env, homeWithConfig()),
        (err: unknown) => {
          assert.ok(err instanceof KubeconfigMissingError && err instanceof ClusterConnectionError, String(err));
          assert.deepEqual(err.missing, files);
          assert.match(err.message, new RegExp(`^kubeconfig not found: ${files.join(", ")} \\(`));
          assert.match(err.message, source);
          assert.doesNotMatch(err.message, /ENOENT/);
          return true;
        },
      );
    });
  }
});
