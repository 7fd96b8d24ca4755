import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { matchesGlob, type GlobSteps } from "../../../src/core/glob.js";

/** The old matcher, as a reference on small inputs (a backtracking regular expression). */
function reference(pattern: string, name: string): boolean {
  return new RegExp(
    `^${pattern
      .split("*")
      .map((p) => p.replace(/[.+?^${}()|[\]\\/]/g, "\\$&"))
      .join(".*")}$`,
    "s",
  ).test(name);
}

describe("matchesGlob", () => {
  const cases: Array<[pattern: string, name: string, want: boolean]> = [
    ["nvidia.com/gpu", "nvidia.com/gpu", true],
    ["nvidia.com/gpu", "nvidia.com/gpus", false],
    ["nvidia.com/gpu", "nvidiaXcom/gpu", false], // "." is no wildcard
    ["nvidia.com/mig-*", "nvidia.com/mig-1g.5gb", true],
    ["nvidia.com/mig-*", "nvidia.com/mig-", true],
    ["nvidia.com/mig-*", "nvidia.com/gpu", false],
    ["*", "", true],
    ["*", "anything", true],
    ["**", "x", true],
    ["", "", true],
    ["", "x", false],
    ["team-*", "team-a", true],
    ["team-*", "xteam-a", false],
    ["*-prod", "ml-prod", true],
    ["*-prod", "ml-prod-2", false],
    ["a*a", "a", false], // prefix and suffix may not overlap
    ["a*a", "aa", true],
    ["*ab*ab*", "abab", true],
    ["*ab*ab*", "aba", false],
    ["*aab*", "aaab", true], // the KMP failure table at work
    ["*abcabd*", "abcabcabd", true],
    ["a*b*c", "abc", true],
    ["a*b*c", "acb", false],
    ["*a*a*a*a*a*a*b", "a".repeat(63), false],
    ["*a*a*a*a*a*a*b", `${"a".repeat(62)}b`, true],
    ["[x]*", "[x]y", true], // regex metacharacters are literal
    ["(.*)", "(.*)", true],
    ["(.*)", "(ab)", false],
  ];
  for (const [pattern, name, want] of cases)
    it(`${JSON.stringify(pattern)} ~ ${JSON.stringify(name)} → ${want}`, () => assert.equal(matchesGlob(pattern, name), want));

  it("agrees with the regular-expression reference on small inputs", () => {
    const alpha = fc.constantFrom("a", "b", "*", ".");
    fc.assert(
      fc.property(fc.string({ unit: alpha, maxLength: 8 }), fc.string({ unit: fc.constantFrom("a", "b", "."), maxLength: 12 }), (pattern, name) => {
        assert.equal(matchesGlob(pattern, name), reference(pattern, name), `${pattern} ~ ${name}`);
      }),
      { numRuns: 20_000 },
    );
  });

  it("linear: at most 2·|name| + |pattern| comparisons, whatever the pattern", () => {
    const worst: Array<[string, string]> = [
      ["*a*a*a*a*a*a*b*", "a".repeat(63)],
      [`${"*a".repeat(200)}*b*`, "a".repeat(10_000)],
      [`*${"a".repeat(100)}b*`, "a".repeat(10_000)],
      [`*${"ab".repeat(50)}c*`, "ab".repeat(5_000)],
    ];
    for (const [pattern, name] of worst) {
      const counter: GlobSteps = { steps: 0 };
      matchesGlob(pattern, name, counter);
      assert.ok(counter.steps > 0, "the matcher counts its steps");
      assert.ok(counter.steps <= 2 * name.length + pattern.length, `${pattern.slice(0, 20)}…: ${counter.steps} steps on ${name.length} characters`);
    }
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom("a", "b", "*"), maxLength: 40 }),
        fc.string({ unit: fc.constantFrom("a", "b"), maxLength: 200 }),
        (pattern, name) => {
          const counter: GlobSteps = { steps: 0 };
          matchesGlob(pattern, name, counter);
          return counter.steps <= 2 * name.length + pattern.length;
        },
      ),
      { numRuns: 5_000 },
    );
  });
});
