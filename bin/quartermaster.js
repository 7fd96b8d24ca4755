#!/usr/bin/env node
// Package entry point: runs the compiled CLI (built by `npm run build`, which `npm ci` runs via `prepare`).
// `serve` runs the bundle `npm run build` also writes (release/bundle.ts: a few files to load instead of ~140, for a
// fast cold start) when it is there; every other command, and `serve` after a bare `tsc` build, runs dist/src/cli.
import { existsSync } from "node:fs";

const bundle = new URL("../dist/src/bundle/serve.mjs", import.meta.url);
if (process.argv[2] === "serve" && existsSync(bundle)) await import(bundle.href);
else await import("../dist/src/cli/main.js");
