/**
 * A cache no watch can keep current is not read as synced (src/kube/informer.ts): client-node's real Watch against
 * a local server whose LIST answers and whose watch is refused (403: the Role grants list but not watch) or not
 * served (404: the CRD was removed after the LIST). The refusal reaches the informer's error handlers with its
 * status in `code` (what statusOf and the restart policy read), the cache stops counting as synced, and once a
 * watch opens again it counts again.
 */
import assert from "node:assert/strict";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import * as k8s from "@kubernetes/client-node";
import { statusOf } from "../../../src/kube/client.js";
import { trimmedInformer } from "../../../src/kube/informer.js";

const PATH = "/apis/kueue.x-k8s.io/v1beta1/workloads";
const item = { metadata: { name: "w", namespace: "team-a", resourceVersion: "5" } };

/** A server whose watch answers `watchStatus.now`; a 200 watch stays open, saying nothing. */
async function apiserver(watchStatus: { now: number }) {
  const open: ServerResponse[] = [];
  const srv = createServer((req, res) => {
    if (!req.url?.includes("watch=true")) return res.writeHead(200, { "content-type": "application/json" }).end("{}");
    if (watchStatus.now !== 200) return res.writeHead(watchStatus.now, { "content-type": "application/json" }).end("{}");
    res.writeHead(200, { "content-type": "application/json" });
    res.flushHeaders();
    open.push(res);
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const kc = new k8s.KubeConfig();
  const server = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  kc.loadFromOptions({
    clusters: [{ name: "c", server, skipTLSVerify: true }],
    users: [{ name: "u" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return {
    kc,
    close: async () => {
      for (const r of open) r.destroy();
      srv.closeAllConnections();
      await new Promise((r) => srv.close(r));
    },
  };
}

const until = async (ok: () => boolean, what: string): Promise<void> => {
  for (let i = 0; i < 400 && !ok(); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(ok(), what);
};

describe("an informer whose watch is refused", () => {
  for (const status of [403, 404]) {
    it(`watch answered ${status} after a LIST that worked: an error with code ${status}, not synced; synced again once a watch opens`, async () => {
      const watch = { now: status };
      const api = await apiserver(watch);
      const inf = trimmedInformer<k8s.KubernetesObject>(k8s, api.kc, {
        path: PATH,
        page: async () => ({ metadata: { resourceVersion: "5" }, items: [structuredClone(item)] }),
        trim: (o) => o as k8s.KubernetesObject,
        firstResponseMs: 0,
      });
      const errors: unknown[] = [];
      inf.on("error", (e) => errors.push(e));
      try {
        await inf.start();
        await until(() => errors.length > 0, "the refusal reaches the error handlers");
        assert.equal(statusOf(errors[0]), status, "its status where the restart policy reads it");
        assert.equal(inf.synced(), false, "a cache no watch keeps current is not synced");
        assert.equal(inf.list().length, 1, "what the LIST gave stays (for when a watch opens again)");
        watch.now = 200;
        await inf.start();
        await until(() => inf.synced(), "synced again once a watch opened");
      } finally {
        await inf.stop();
        await api.close();
      }
    });
  }
});
