/**
 * assertKubeconfig: the configurations client-node's loadFromDefault would find, in its order, and
 * NoKubeconfigError (with the message that says what to do) when there is none.
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ClusterConnectionError, NO_KUBECONFIG, NoKubeconfigError } from "../../src/errors.js";
import { assertKubeconfig } from "../../src/kube/client.js";

const emptyHome = (): string => mkdtempSync(join(tmpdir(), "qm-home-"));
const homeWithConfig = (): string => {
  const home = emptyHome();
  mkdirSync(join(home, ".kube"));
  writeFileSync(join(home, ".kube", "config"), "apiVersion: v1\nkind: Config\n");
  return home;
};

describe("assertKubeconfig", () => {
  const found: Array<[string, string | undefined, NodeJS.ProcessEnv, () => string]> = [
    ["--kubeconfig", "/some/file", {}, emptyHome],
    ["$KUBECONFIG", undefined, { KUBECONFIG: "/some/file" }, emptyHome],
    ["~/.kube/config", undefined, {}, homeWithConfig],
  ];
  for (const [name, file, env, home] of found) {
    it(`${name} → goes on`, () => assert.doesNotThrow(() => assertKubeconfig(file, env, home())));
  }

  it("none of them and no ServiceAccount token → NoKubeconfigError saying what to do", { skip: process.env.KUBERNETES_SERVICE_HOST ? "running in a cluster" : false }, () => {
    assert.throws(
      () => assertKubeconfig(undefined, {}, emptyHome()),
      (err: unknown) => err instanceof NoKubeconfigError && err instanceof ClusterConnectionError && (err as Error).message === NO_KUBECONFIG,
    );
    assert.equal(NO_KUBECONFIG, "no kubeconfig: set KUBECONFIG, pass --kubeconfig, or run in a cluster");
  });
});
