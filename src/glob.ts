/**
 * @module
 * Name patterns of the policy (`nvidia.com/mig-*`, `team-*`): `*` matches any run of characters, every
 * other character matches itself.
 */

const cache = new Map<string, RegExp>();

export function globToRegExp(pattern: string): RegExp {
  let re = cache.get(pattern);
  if (!re) {
    re = new RegExp(`^${pattern.split("*").map((p) => p.replace(/[.+?^${}()|[\]\\/]/g, "\\$&")).join(".*")}$`);
    cache.set(pattern, re);
  }
  return re;
}

export function matchesGlob(pattern: string, name: string): boolean {
  return globToRegExp(pattern).test(name);
}
