// Lint of src/ and webhooks/ (run by `npm test` as `npm run lint`): typescript-eslint's recommended rules with
// type information, plus the few that keep the code readable as it grows (docs/architecture.md, "Layers").
// Formatting is prettier's (.prettierrc.json), not a lint rule.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", "src/generated/**", "coverage/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    files: ["src/**/*.ts", "webhooks/**/*.ts", "release/**/*.ts"],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // A promise nobody awaits loses its error: every one is awaited, returned, or marked `void` on purpose.
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/no-explicit-any": "error",
      // A function that needs more is a function to split (or an options object).
      complexity: ["error", { max: 20 }],
      "max-params": ["error", { max: 5 }],
      // A function over 80 lines or a file over 500 is doing several things: split it by concern (issue 50). Blank
      // lines and comments do not count: the explanation is never what makes a function too long.
      "max-lines-per-function": ["error", { max: 80, skipBlankLines: true, skipComments: true }],
      "max-lines": ["error", { max: 500, skipBlankLines: true, skipComments: true }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
      // Off on purpose: messages quote what a client sent, whatever its type (`String(raw)` of a value that should
      // have been a string), and "[object Object]" is an honest rendering of an object where a name was expected.
      "@typescript-eslint/no-base-to-string": "off",
      "@typescript-eslint/restrict-template-expressions": "off",
    },
  },
);
