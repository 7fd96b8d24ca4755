#!/usr/bin/env node
// Package entry point: runs the compiled CLI (built by `npm run build`, which `npm ci` runs via `prepare`).
await import("../dist/src/cli/main.js");
