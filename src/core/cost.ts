/**
 * @module
 * The cost bound of one review. The rules run on the event loop, so a review that asks for too much
 * work would hold every other review behind it (issue 16: a 40,000-container pod held a small review
 * for 11.7 s, past the apiserver's webhook timeout). Before any rule runs, the webhook prices the
 * object, and a review over {@link MAX_REVIEW_COST} is answered at once: a mutating webhook admits the
 * object unchanged with a warning, a validating one denies it, saying why.
 *
 * The price follows how the rules work: each rule makes one pass over the containers and their resource
 * entries, and the per-pod GPU sum makes one more pass per distinct GPU resource name. So
 *
 *     cost = items × passes
 *     items  = pod specs + containers + init containers + ephemeral containers + resource entries
 *     passes = the webhook's rules + distinct GPU resource names
 *
 * over the pod, or over every replica template of a job (and the old object too, for an UPDATE). Every
 * rule is linear in the items, so the cost bounds the work. 10,000 admits a pod of ~700 one-GPU containers
 * under the six mutations: two orders of magnitude past real training pods (a few containers, a few
 * resources; in the test corpus pods are priced at most 78, jobs 160, a job UPDATE 320), while the most
 * expensive admitted review takes ~20 ms of the server's time (bench/abuse prints it). Pricing stops
 * counting once the bound is passed, so pricing itself is bounded too.
 *
 * On a document parsed off-thread a long container list is a stand-in (`stand-in.ts`): pricing gives the
 * very answer while the bound is passed by adding a list's length, and throws StandInUndecided when it would
 * have to look inside a stand-in (its entries could pass the bound at another count).
 */
import { isObject } from "./object.js";
import { isGpuResource, type GpuPattern } from "./gpu.js";
import { standInNames, StandInUndecided } from "./stand-in.js";

/** Reviews priced above this are answered without running the rules. */
export const MAX_REVIEW_COST = 10_000;

export interface ReviewCost {
  /** Containers and resource entries counted (a lower bound once `over`). */
  items: number;
  /** Rules plus distinct GPU resource names (only the rules once `over`: names are not counted then). */
  passes: number;
  /** items × passes; at least this much once `over`. */
  cost: number;
  /** True when the cost is above the bound. */
  over: boolean;
  /** True when counting stopped at the bound (then the true cost is higher still). */
  partial: boolean;
  /**
   * Where the denial points and why, when one field made the object too large (a TrainJob's runtimePatches past
   * Trainer's CRD limit): the field, and a sentence naming the fix. Absent: `spec`, "split the workload".
   */
  at?: { field: string; why: string };
}

const CONTAINER_LISTS = ["initContainers", "containers", "ephemeralContainers"] as const;

/**
 * The cost of running `rules` rules over the given pod specs (anything, as it arrived: what is not
 * a pod spec counts nothing). `gpu` is the policy's GPU patterns.
 */
export function specsCost(specs: Iterable<unknown>, rules: number, gpu: readonly GpuPattern[], max = MAX_REVIEW_COST): ReviewCost {
  const perPass = Math.max(1, rules);
  // Items allowed before any GPU name is counted: past this the cost is over whatever the names are.
  const limit = Math.floor(max / perPass);
  let items = 0;
  const over = (): ReviewCost => ({ items, passes: perPass, cost: items * perPass, over: true, partial: true });
  const names = new Set<string>();
  for (const spec of specs) {
    // Each pod spec (a job's replica type) is an item of its own: some rules run once per replica type.
    if (++items > limit) return over();
    if (!isObject(spec)) continue;
    for (const list of CONTAINER_LISTS) {
      const containers = spec[list];
      if (!Array.isArray(containers)) continue;
      items += containers.length;
      if (items > limit) return over();
      // A stand-in list (a large body parsed off-thread, `stand-in.ts`) has its length only: what its
      // containers' entries would add is unknown, and so is the count at which the bound is passed.
      if (standInNames(containers) !== undefined) throw new StandInUndecided("resource entries of a container list within the bound");
      for (const c of containers) {
        const resources = isObject(c) ? c.resources : undefined;
        if (!isObject(resources)) continue;
        for (const side of [resources.requests, resources.limits]) {
          if (!isObject(side)) continue;
          for (const name in side) {
            if (!Object.hasOwn(side, name)) continue;
            if (++items > limit) return over();
            names.add(name);
          }
        }
      }
    }
  }
  let passes = perPass;
  for (const name of names) if (isGpuResource(name, gpu)) passes++;
  const cost = items * passes;
  return { items, passes, cost, over: cost > max, partial: false };
}

/** The pod specs of a job's replica templates (`spec.<anything>.<type>.template.spec`, or Caffe2's `spec.replicaSpecs.template.spec`). */
export function jobTemplateSpecs(job: unknown, replicaSpecsField: string, single: boolean): unknown[] {
  if (!isObject(job) || !isObject(job.spec)) return [];
  const field = job.spec[replicaSpecsField];
  if (!isObject(field)) return [];
  const specsOf = (replica: unknown): unknown => (isObject(replica) && isObject(replica.template) ? replica.template.spec : undefined);
  if (single) return [specsOf(field)];
  const out: unknown[] = [];
  for (const type in field) if (Object.hasOwn(field, type)) out.push(specsOf(field[type]));
  return out;
}

/** Why a review was not checked, short enough for an admission warning (120 characters). */
export function describeCost(c: ReviewCost, max = MAX_REVIEW_COST): string {
  return `too large to check: cost ${c.partial ? "at least " : ""}${c.cost} is over the bound of ${max}`;
}

/** {@link describeCost} with what was counted, for a denial's message. */
export function explainCost(c: ReviewCost, max = MAX_REVIEW_COST): string {
  const at = c.partial ? "at least " : "";
  return `${describeCost(c, max)} (${at}${c.items} pod specs, containers and resource entries × ${c.passes} rule passes)`;
}
