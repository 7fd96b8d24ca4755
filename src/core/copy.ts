/**
 * @module
 * Copy-on-write helpers for plain JSON objects (pods, responses), tuned for V8's hidden classes.
 */

/**
 * A copy of `o` (or of `{}` when it is null or undefined) with `key` set to `value`: how copy-on-write updates of pods and responses
 * add or replace a field. Measured on Node 20's V8: `{ ...o, key: value }` is the fastest copy (~20 ns) when
 * `o` already has `key`; when it does not, V8 builds a fresh hidden class for every such copy (~1.2 µs,
 * and the classes and their key caches become old-generation garbage: under load a third of the
 * admission server's GC time, bench/admission), while `Object.assign` onto `{}` reuses one (~80 ns).
 * The same goes for adding a property to a spread copy afterwards, so {@link copyOf} exists too.
 */
export function withKey<T extends object, K extends keyof T>(o: T | null | undefined, key: K, value: T[K]): T {
  if ((o != null && (Object.hasOwn(o, key) || hasProtoKey(o))) || key === "__proto__") return { ...o, [key]: value } as T;
  return Object.assign({}, o, { [key]: value });
}

/** A shallow copy of `o` that new keys may then be added to (see {@link withKey}). */
export function copyOf<T extends object>(o: T | null | undefined): T {
  return o != null && hasProtoKey(o) ? { ...o } : Object.assign<T, T | null | undefined>({} as T, o);
}

/**
 * True when `o` has an own `__proto__` key (JSON.parse makes one from `"__proto__": ...`). Object.assign
 * would hand it to the prototype setter instead of copying it, so such objects (only ever from hostile
 * or broken requests) are copied by spread, which keeps every own key.
 */
function hasProtoKey(o: object): boolean {
  return Object.hasOwn(o, "__proto__");
}
