/**
 * @module
 * GPUs asked for through Dynamic Resource Allocation (`resource.k8s.io/v1`, GA in Kubernetes 1.34), read as the
 * extended resources they stand for, so every rule, mutation and ledger figure that counts `nvidia.com/gpu`
 * counts a claim for the same devices the same way.
 *
 * The policy maps each GPU DeviceClass to a resource name (`gpu.deviceClasses`: NVIDIA's DRA driver publishes
 * `gpu.nvidia.com` and `mig.nvidia.com`, AMD's `gpu.amd.com`). A class whose resource name holds `{profile}` is
 * partitioned: a request whose selectors name a MIG profile counts as `nvidia.com/mig-<profile>`, one that names
 * none as `nvidia.com/mig-any`.
 *
 * How many devices a request can get (kubernetes staging/src/k8s.io/api/resource/v1/types.go, `DeviceRequest`):
 * - `exactly` with `allocationMode: ExactCount` (the default): `count` (default 1);
 * - `exactly` with `allocationMode: All`: every matching device on the node, which only the cluster's capacity
 *   bounds: counted as the largest node's capacity of that class when it is known ({@link DraCapacity}), and
 *   reported as unbounded otherwise (the rules refuse it where a cap applies);
 * - `firstAvailable`: one of the alternatives, the first that fits on the node the scheduler tries (kubernetes
 *   `pkg/scheduler/framework/plugins/dynamicresources`, the allocator's sub-request loop): counted as the largest,
 *   and every GPU alternative kept ({@link GpuRequest.alternatives}) so the rules judge each on its own.
 * A request of a class the policy does not list but whose name looks like a GPU's ({@link unlistedGpuClasses},
 * `looksLikeGpu` in src/vendors), or whose DeviceClass object may select GPUs or is not known (read by the webhooks
 * under a GPU cap, {@link classSelectsGpus}), is not counted here: the rules refuse it under a GPU cap (`gpu-unknown`).
 * Everything here reads untyped JSON that reached a webhook: it never throws, and what it cannot read counts 0.
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import { looksLikeGpu } from "../vendors/index.js";
import { isObject } from "./object.js";

/** A policy `gpu.deviceClasses` entry: a DeviceClass whose devices are GPUs, and the resource name it stands for. */
export interface GpuDeviceClass {
  readonly name: string;
  readonly resourceName: string;
  /** The extended-resource name the cluster's DeviceClass serves (its `spec.extendedResourceName`), when it sets one. */
  readonly extendedResourceName?: string;
}

/** The spec of a ResourceClaim, or of a ResourceClaimTemplate's claim (`spec.spec`), as far as it is read here. */
export interface ClaimSpec {
  devices?: { requests?: unknown };
}

/** A pod's `spec.resourceClaims` entry resolved to the claim or template it names. */
export interface ResolvedClaim {
  /** Where the claim's spec came from, for messages: `ResourceClaim/x` or `ResourceClaimTemplate/y`. */
  readonly source: string;
  readonly spec: ClaimSpec | undefined;
  /** The claim is the one the scheduler made for an extended-resource request (`status.extendedResourceClaimStatus`): counted by its container requests already. */
  readonly forExtendedResource?: boolean;
}

/** The claims of one pod, by the name its `spec.resourceClaims` gives them. */
export type ResolvedClaims = ReadonlyMap<string, ResolvedClaim>;

/** The largest number of devices one node offers per DeviceClass, where the cluster's ResourceSlices are known. */
export type DraCapacity = ReadonlyMap<string, number>;

/** What one device request (or sub-request) can be given, read as an extended resource. */
export interface GpuRequest {
  /** The request's name in the claim (`requests[].name`, `/<sub-request>` for `firstAvailable`). */
  readonly request: string;
  /** Field path inside the claim spec, e.g. `devices.requests[0].exactly.count`. */
  readonly field: string;
  readonly deviceClassName: string;
  readonly resourceName: string;
  /** Devices it can be given; `undefined` for `allocationMode: All` with no known capacity. */
  readonly count: number | undefined;
  readonly allocationMode: "ExactCount" | "All";
  /** Accelerator products its selectors pin (`productName == '…'` / `in [...]`), as written. */
  readonly products: readonly string[];
  /** MIG profiles its selectors pin. */
  readonly profiles: readonly string[];
  /** Selectors that test the product or profile in a way that could select any value (`!=`, `matches`, …). */
  readonly openSelectors: readonly string[];
  /**
   * For a `firstAvailable` request: every GPU alternative, this one (the largest, which the totals count) among
   * them. The scheduler takes the first that fits, so each is judged on its own by the per-container caps and
   * the allow-lists. Absent for an `exactly` request.
   */
  readonly alternatives?: readonly GpuRequest[];
}

/** The alternatives of a request to judge one by one: its `firstAvailable` GPU alternatives, or itself. */
export function alternativesOf(gpu: GpuRequest): readonly GpuRequest[] {
  return gpu.alternatives ?? [gpu];
}

const listOf = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const text = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** The policy's class entry for `deviceClassName`, if it is a GPU class. */
export function gpuDeviceClass(deviceClassName: string, classes: readonly GpuDeviceClass[]): GpuDeviceClass | undefined {
  return classes.find((c) => c.name === deviceClassName);
}

// A CEL string literal, single- or double-quoted, with backslash escapes (the selectors' own language).
const LITERAL = String.raw`'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"`;
const unquote = (lit: string): string => lit.slice(1, -1).replace(/\\(.)/g, "$1");

// An index `[...]` right after a name, `]` or `)` (not a list literal after `in`), with what it holds.
const INDEX = /(?<=[\w\])])\s*\[([^[\]]*)\]/g;
const IDENTIFIER = /^[A-Za-z_]\w*$/;

/**
 * The expression with each field read through an index written as a field (`x['productName']` and
 * `x["productName"]` → `x.productName`), and whether some index could not be read so (`x[k]`,
 * `x['product' + 'Name']`, an escape in the key): such an index may read any attribute.
 */
function fieldsAsSelections(expression: string): { text: string; dynamic: boolean } {
  let dynamic = false;
  const literal = new RegExp(String.raw`^\s*(${LITERAL})\s*$`);
  const text = expression.replace(INDEX, (whole, inside: string, offset: number) => {
    // `in [...]`: a list. Tested on the 32 characters before the bracket (the whole text before it made long selectors
    // quadratic); a cut-off start is marked with a word character, so a window that begins at `in` is read as an
    // index, which at worst is read as open (refused while an allow-list is set), never as a pin.
    const start = Math.max(0, offset - 32);
    if (/(?:^|[^\w.])in\s*$/.test((start > 0 ? "x" : "") + expression.slice(start, offset))) return whole;
    const lit = literal.exec(inside)?.[1];
    if (lit === undefined || lit.includes("\\")) {
      dynamic = true;
      return whole;
    }
    const key = unquote(lit);
    return IDENTIFIER.test(key) ? `.${key}` : whole; // a domain (`['gpu.nvidia.com']`) stays an index
  });
  return { text, dynamic };
}

/**
 * The values a selector pins `attribute` to: `… .attribute == 'v'` (either side) and `… .attribute in ['a', 'b']`,
 * the attribute written as a field (`.productName`) or as an index (`['productName']`, `["productName"]`).
 * Hand-written over the expression text: no CEL parser for JavaScript reads the Kubernetes CEL dialect, and only
 * these two shapes can be checked against an allow-list; any other test of the attribute is reported open, and
 * so is an index that cannot be read as a name (`[k]`, a concatenation), which may read any attribute.
 */
export function pinnedValues(expression: string, attribute: string): { values: string[]; open: boolean } {
  const { text: expr, dynamic } = fieldsAsSelections(expression);
  const attr = String.raw`\.${attribute}\b`;
  const values: string[] = [];
  let rest = expr;
  const patterns = [
    new RegExp(String.raw`${attr}\s*==\s*(${LITERAL})`, "g"),
    new RegExp(String.raw`(${LITERAL})\s*==\s*[\w.\[\]'"]*${attr}`, "g"),
    new RegExp(String.raw`${attr}\s+in\s+\[((?:\s*(?:${LITERAL})\s*,?)*)\]`, "g"),
  ];
  for (const re of patterns) {
    rest = rest.replace(re, (_m, group: string) => {
      for (const lit of group.match(new RegExp(LITERAL, "g")) ?? []) values.push(unquote(lit));
      return " ";
    });
  }
  // A disjunction, a negation or a conditional around a pinned value can select any value after all.
  const loose = values.length > 0 && /\|\||!|\?/.test(expr);
  return { values, open: dynamic || loose || new RegExp(attr).test(rest) };
}

interface Alternative {
  readonly deviceClassName: string;
  readonly allocationMode: "ExactCount" | "All";
  readonly count: number;
  readonly selectors: readonly string[];
}

function alternative(v: Record<string, unknown>): Alternative | undefined {
  const deviceClassName = text(v.deviceClassName);
  if (deviceClassName === undefined) return undefined;
  const selectors = listOf(v.selectors)
    .map((s) => (isObject(s) && isObject(s.cel) ? text(s.cel.expression) : undefined))
    .filter((s): s is string => s !== undefined);
  const raw = v.count;
  const count = typeof raw === "number" && Number.isSafeInteger(raw) && raw > 0 ? raw : 1;
  return { deviceClassName, allocationMode: v.allocationMode === "All" ? "All" : "ExactCount", count, selectors };
}

function gpuRequest(alt: Alternative, where: { request: string; field: string }, gpuClass: GpuDeviceClass, capacity: DraCapacity | undefined): GpuRequest {
  const products: string[] = [];
  const profiles: string[] = [];
  const openSelectors: string[] = [];
  for (const s of alt.selectors) {
    const p = pinnedValues(s, "productName");
    const m = pinnedValues(s, "profile");
    products.push(...p.values);
    profiles.push(...m.values);
    if (p.open || m.open) openSelectors.push(s);
  }
  const partitioned = gpuClass.resourceName.includes("{profile}");
  const resourceName = partitioned ? gpuClass.resourceName.replace("{profile}", profiles.length === 1 ? profiles[0]! : "any") : gpuClass.resourceName;
  const count = alt.allocationMode === "All" ? capacity?.get(alt.deviceClassName) : alt.count;
  return { ...where, deviceClassName: alt.deviceClassName, resourceName, count, allocationMode: alt.allocationMode, products, profiles, openSelectors };
}

/**
 * The GPU requests of a claim spec: one per device request whose class is a GPU class (for `firstAvailable`, the
 * alternative that can be given the most devices, with every GPU alternative in `alternatives`; a GPU alternative
 * counts even when a CPU one is listed first). Requests of other classes are not GPUs and are left out.
 */
export function claimGpuRequests(spec: ClaimSpec | undefined, classes: readonly GpuDeviceClass[], capacity?: DraCapacity): readonly GpuRequest[] {
  if (!isObject(spec) || !isObject(spec.devices)) return [];
  const kept = requestsKept.get(spec);
  if (kept && kept.classes === classes && kept.capacity === capacity) return kept.requests;
  const requests = Object.freeze(readGpuRequests(spec as { devices: Record<string, unknown> }, classes, capacity));
  requestsKept.set(spec, { classes, capacity, requests });
  return requests;
}

/**
 * {@link claimGpuRequests}' answers by claim spec, for the classes and capacity each was read with. A claim read through
 * the webhook's cache is one object for every pod and template naming it, and its requests were read again by every
 * rule of every review (bench:dra-pods: 15 % of a DRA pod's review, its CEL selectors parsed a dozen times).
 */
const requestsKept = new WeakMap<object, { classes: readonly GpuDeviceClass[]; capacity: DraCapacity | undefined; requests: readonly GpuRequest[] }>();

function readGpuRequests(spec: { devices: Record<string, unknown> }, classes: readonly GpuDeviceClass[], capacity: DraCapacity | undefined): GpuRequest[] {
  const out: GpuRequest[] = [];
  listOf(spec.devices.requests).forEach((r, i) => {
    if (!isObject(r)) return;
    const name = text(r.name) ?? String(i);
    if (isObject(r.exactly)) {
      const alt = alternative(r.exactly);
      const cls = alt && gpuDeviceClass(alt.deviceClassName, classes);
      if (alt && cls) out.push(gpuRequest(alt, { request: name, field: `devices.requests[${i}].exactly` }, cls, capacity));
      return;
    }
    const alternatives: GpuRequest[] = [];
    listOf(r.firstAvailable).forEach((sub, j) => {
      if (!isObject(sub)) return;
      const alt = alternative(sub);
      const cls = alt && gpuDeviceClass(alt.deviceClassName, classes);
      if (alt && cls)
        alternatives.push(gpuRequest(alt, { request: `${name}/${text(sub.name) ?? j}`, field: `devices.requests[${i}].firstAvailable[${j}]` }, cls, capacity));
    });
    let best: GpuRequest | undefined;
    for (const req of alternatives) if (!best || (best.count !== undefined && (req.count === undefined || req.count > best.count))) best = req;
    if (best) out.push({ ...best, alternatives });
  });
  return out;
}

/**
 * A DeviceClass the policy does not list, as a webhook read it (cluster-scoped, `resource.k8s.io/v1`): `gpu` says why
 * its devices may be GPUs ({@link classSelectsGpus}), absent when they are not; or the class is not there, or could
 * not be read.
 */
export type DeviceClassRead = { kind: "found"; gpu?: string } | { kind: "missing" } | { kind: "unreadable"; reason: string };

/**
 * Why a DeviceClass object may select GPU devices, or undefined when it selects none: its `extendedResourceName` looks
 * like a GPU's; it has no selectors (it selects every device of every driver, GPUs included); or a string in its CEL
 * selectors names a listed GPU class or a driver or attribute domain that looks like a GPU's (`device.driver ==
 * "gpu.nvidia.com"`, `device.attributes["gpu.nvidia.com"]`). Red team: an administrator's class `fast` selecting
 * NVIDIA's driver, not listed in `gpu.deviceClasses`, counted 0 GPUs under every cap.
 */
export function classSelectsGpus(object: unknown, classes: readonly GpuDeviceClass[]): string | undefined {
  const spec = isObject(object) && isObject(object.spec) ? object.spec : {};
  const extended = text(spec.extendedResourceName);
  if (extended !== undefined && looksLikeGpu(extended)) return `its extendedResourceName ${extended} is a GPU's`;
  const selectors = listOf(spec.selectors);
  if (selectors.length === 0) return "it has no selectors, so it selects every device, GPUs included";
  for (const sel of selectors) {
    const expression = isObject(sel) && isObject(sel.cel) ? text(sel.cel.expression) : undefined;
    for (const lit of (expression ?? "").match(new RegExp(LITERAL, "g")) ?? []) {
      const value = unquote(lit);
      if (gpuDeviceClass(value, classes) || looksLikeGpu(value)) return `its selector names ${value}`;
    }
  }
  return undefined;
}

/** A request (or `firstAvailable` alternative) of a DeviceClass the policy does not list whose devices may be GPUs, or are not known. */
export interface UnlistedGpuClass {
  /** The request's name in the claim (`<request>/<sub-request>` for an alternative). */
  readonly request: string;
  /** Field path inside the claim spec, e.g. `devices.requests[0].exactly`. */
  readonly field: string;
  readonly deviceClassName: string;
  /** Why it is refused under a GPU cap: `looks like a GPU class`, or what its object says, or that it is not known. */
  readonly why: string;
}

/** Each request (and `firstAvailable` alternative) of a claim spec with its DeviceClass name and field. */
function requestClasses(spec: ClaimSpec | undefined): { request: string; field: string; deviceClassName: string }[] {
  const out: { request: string; field: string; deviceClassName: string }[] = [];
  if (!isObject(spec) || !isObject(spec.devices)) return out;
  const add = (v: unknown, request: string, field: string): void => {
    const cls = isObject(v) ? text(v.deviceClassName) : undefined;
    if (cls !== undefined) out.push({ request, field, deviceClassName: cls });
  };
  listOf(spec.devices.requests).forEach((r, i) => {
    if (!isObject(r)) return;
    const name = text(r.name) ?? String(i);
    if (isObject(r.exactly)) add(r.exactly, name, `devices.requests[${i}].exactly`);
    listOf(r.firstAvailable).forEach((sub, j) =>
      add(sub, `${name}/${(isObject(sub) ? text(sub.name) : undefined) ?? j}`, `devices.requests[${i}].firstAvailable[${j}]`),
    );
  });
  return out;
}

/**
 * The DeviceClasses a claim spec names that the policy does not list and whose names do not look like a GPU's: the
 * ones whose objects a webhook reads under a GPU cap to know whether they select GPUs ({@link classSelectsGpus}).
 */
export function classesToRead(spec: ClaimSpec | undefined, classes: readonly GpuDeviceClass[]): string[] {
  return [...new Set(requestClasses(spec).map((r) => r.deviceClassName))].filter((c) => !gpuDeviceClass(c, classes) && !looksLikeGpu(c));
}

/**
 * The requests of a claim spec whose DeviceClass is not among `classes` but may give GPUs: its name looks like a GPU
 * class's (`looksLikeGpu` in src/vendors: `vfio.gpu.nvidia.com`, `gpu.example.com`), or, given the classes read
 * (`read`), its object selects GPUs or is not known (absent, unreadable, or not read): devices nothing here counts,
 * which the rules must not take for none. Without `read` a class whose name does not look like a GPU's is not one.
 */
export function unlistedGpuClasses(
  spec: ClaimSpec | undefined,
  classes: readonly GpuDeviceClass[],
  read?: ReadonlyMap<string, DeviceClassRead>,
): UnlistedGpuClass[] {
  const out: UnlistedGpuClass[] = [];
  for (const r of requestClasses(spec)) {
    const cls = r.deviceClassName;
    if (gpuDeviceClass(cls, classes)) continue;
    if (looksLikeGpu(cls)) {
      out.push({ ...r, why: "looks like a GPU class" });
      continue;
    }
    if (!read) continue;
    const got = read.get(cls);
    const why =
      got === undefined
        ? "was not read (more DeviceClasses than one review reads), so what it selects is not known"
        : got.kind === "missing"
          ? "does not exist, so what it selects is not known"
          : got.kind === "unreadable"
            ? `could not be read (${got.reason}), so what it selects is not known`
            : got.gpu && `may select GPUs (${got.gpu})`;
    if (why) out.push({ ...r, why });
  }
  return out;
}

/** One GPU request of a pod through a claim, with where it comes from. */
export interface PodGpuClaim {
  /** The pod's name for the claim (`spec.resourceClaims[].name`). */
  readonly claim: string;
  /** Its index in `spec.resourceClaims`, for field paths. */
  readonly index: number;
  readonly source: string;
  readonly gpu: GpuRequest;
}

/**
 * The GPU requests a pod makes through its claims, each claim counted once however many containers use it.
 * Claims that could not be resolved, and those the scheduler made for an extended-resource request (already
 * counted by the container's own request), are left out.
 */
export function podGpuClaims(
  spec: V1PodSpec | undefined,
  claims: ResolvedClaims | undefined,
  classes: readonly GpuDeviceClass[],
  capacity?: DraCapacity,
): PodGpuClaim[] {
  const out: PodGpuClaim[] = [];
  if (!claims || claims.size === 0 || !spec) return out;
  listOf(spec.resourceClaims).forEach((entry, index) => {
    const claim = isObject(entry) ? text(entry.name) : undefined;
    const resolved = claim === undefined ? undefined : claims.get(claim);
    if (claim === undefined || !resolved || resolved.forExtendedResource) return;
    for (const gpu of claimGpuRequests(resolved.spec, classes, capacity)) out.push({ claim, index, source: resolved.source, gpu });
  });
  return out;
}

/** The pod's GPUs through claims, per resource name, in nano-units (1 device = 10⁹, as {@link effectivePodGpuNanos} counts). */
export function podClaimGpuNanos(
  spec: V1PodSpec | undefined,
  claims: ResolvedClaims | undefined,
  classes: readonly GpuDeviceClass[],
  capacity?: DraCapacity,
): Map<string, bigint> {
  const out = new Map<string, bigint>();
  for (const { gpu } of podGpuClaims(spec, claims, classes, capacity)) {
    out.set(gpu.resourceName, (out.get(gpu.resourceName) ?? 0n) + BigInt(gpu.count ?? 0) * 1_000_000_000n);
  }
  return out;
}

/** True when the pod names a claim: the webhooks' match condition lets such a pod through, to be resolved there. */
export function hasResourceClaims(spec: V1PodSpec | undefined): boolean {
  return listOf(spec?.resourceClaims).length > 0;
}

/** Where each of the pod's claims is stored: `{claim: name}` or `{template: name}` (what the webhooks look up). */
export function claimReferences(spec: V1PodSpec | undefined): { name: string; claim?: string; template?: string }[] {
  const out: { name: string; claim?: string; template?: string }[] = [];
  for (const entry of listOf(spec?.resourceClaims)) {
    if (!isObject(entry)) continue;
    const name = text(entry.name);
    if (name === undefined) continue;
    const claim = text(entry.resourceClaimName);
    const template = text(entry.resourceClaimTemplateName);
    out.push({ name, ...(claim !== undefined ? { claim } : {}), ...(template !== undefined ? { template } : {}) });
  }
  return out;
}

/**
 * The claim objects a decision may read, by name, in the pod's namespace: what the webhooks looked up (or `admit -f`
 * was given). A name mapped to `undefined` was looked for and is not there.
 */
export interface KnownClaims {
  readonly claims: ReadonlyMap<string, ClaimSpec | undefined>;
  /** ResourceClaimTemplates by name: their claim spec (`spec.spec`). */
  readonly templates: ReadonlyMap<string, ClaimSpec | undefined>;
  /** The names whose read failed (an error or a timeout, not an absence), with why: their devices are unknown. */
  readonly unreadable?: { readonly claims: ReadonlyMap<string, string>; readonly templates: ReadonlyMap<string, string> };
  /** The unlisted DeviceClasses the claims name, as read (under a GPU cap: {@link classesToRead}); absent: not read. */
  readonly deviceClasses?: ReadonlyMap<string, DeviceClassRead>;
}

/** The claim spec of a ResourceClaim (`spec`) or a ResourceClaimTemplate (`spec.spec`) object. */
export function claimSpecOf(object: unknown, kind: "ResourceClaim" | "ResourceClaimTemplate"): ClaimSpec | undefined {
  const spec = isObject(object) ? object.spec : undefined;
  const inner = kind === "ResourceClaimTemplate" && isObject(spec) ? spec.spec : spec;
  return isObject(inner) ? inner : undefined;
}

/** Claims the scheduler made for the pod's extended-resource requests (`status.extendedResourceClaimStatus`, 1.34+). */
export function extendedResourceClaimNames(status: unknown): Set<string> {
  const s = isObject(status) && isObject(status.extendedResourceClaimStatus) ? text(status.extendedResourceClaimStatus.resourceClaimName) : undefined;
  return new Set(s === undefined ? [] : [s]);
}

/** The pod's claims resolved against what is known; a claim with nothing known is left out (and counts nothing). */
export function resolveClaims(spec: V1PodSpec | undefined, known: KnownClaims | undefined, extendedClaims: ReadonlySet<string> = new Set()): ResolvedClaims {
  const out = new Map<string, ResolvedClaim>();
  if (!known) return out;
  for (const ref of claimReferences(spec)) {
    if (ref.claim !== undefined && known.claims.has(ref.claim)) {
      out.set(ref.name, { source: `ResourceClaim/${ref.claim}`, spec: known.claims.get(ref.claim), forExtendedResource: extendedClaims.has(ref.claim) });
    } else if (ref.template !== undefined && known.templates.has(ref.template)) {
      out.set(ref.name, { source: `ResourceClaimTemplate/${ref.template}`, spec: known.templates.get(ref.template) });
    }
  }
  return out;
}
