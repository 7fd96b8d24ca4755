/**
 * @module
 * @kubernetes/client-node and a loaded KubeConfig, for every reader and writer in `src/kube`. The module is
 * imported here on first use (it takes over a second to load), never at start-up.
 */
import type { KubeConfig } from "@kubernetes/client-node";

export type ClientNode = typeof import("@kubernetes/client-node");

/** The client module and the kubeconfig at `file`, else the in-cluster ServiceAccount or $KUBECONFIG. */
export async function kubeClient(file: string | undefined): Promise<{ k8s: ClientNode; kc: KubeConfig }> {
  const k8s = await import("@kubernetes/client-node");
  const kc = new k8s.KubeConfig();
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  return { k8s, kc };
}

/** The HTTP status client-node puts on a failed call's error (`code`), if any. */
export function statusOf(err: unknown): number | undefined {
  return (err as { code?: number } | null)?.code;
}
