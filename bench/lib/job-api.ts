/**
 * A stand-in apiserver for the admission benchmarks: it serves the bench pod's PyTorchJob (so the mutating
 * path does its real, cached job lookup) and counts the reads, and writes a kubeconfig pointing at it.
 */
import { writeFileSync } from "node:fs";
import { createServer } from "node:http";

const JOB = JSON.stringify({
  apiVersion: "kubeflow.org/v1",
  kind: "PyTorchJob",
  metadata: { name: "llm-pretrain", namespace: "team-nlp", uid: "0b7c5d1e-2f3a-4b5c-8d9e-0f1a2b3c4d5e" },
  spec: {
    nprocPerNode: "8",
    pytorchReplicaSpecs: {
      Master: { replicas: 1, template: { spec: { containers: [{ name: "pytorch", image: "x" }] } } },
      Worker: { replicas: 7, template: { spec: { containers: [{ name: "pytorch", image: "x" }] } } },
    },
  },
});

export interface JobApi {
  /** Job reads served so far. */
  readonly reads: number;
  close(): void;
}

/** Starts the stand-in on 127.0.0.1 and writes `kubeconfigFile` for it. */
export async function startJobApi(kubeconfigFile: string): Promise<JobApi> {
  let reads = 0;
  const server = createServer((req, res) => {
    if (req.url?.startsWith("/apis/kubeflow.org/v1/namespaces/team-nlp/pytorchjobs/llm-pretrain")) {
      reads++;
      res.writeHead(200, { "content-type": "application/json" }).end(JOB);
    } else res.writeHead(404, { "content-type": "application/json" }).end('{"kind":"Status","code":404}');
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as { port: number }).port;
  // JSON, as a kubeconfig may be: the server reads it without a YAML parser, as one in a cluster reads its
  // ServiceAccount (no kubeconfig at all), so a cold start here does not pay for a parser a deployed one never loads.
  writeFileSync(
    kubeconfigFile,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "bench", cluster: { server: `http://127.0.0.1:${port}`, "insecure-skip-tls-verify": true } }],
      users: [{ name: "bench", user: { token: "bench" } }],
      contexts: [{ name: "bench", context: { cluster: "bench", user: "bench" } }],
      "current-context": "bench",
    }),
  );
  return {
    get reads() {
      return reads;
    },
    close: () => server.close(),
  };
}
