/**
 * What the `serve` bundle (./bundle.ts) has in place of an `import ... from "node:http"` in Quartermaster's own
 * modules: the same module, loaded with `require`. On Node.js 22 and later an ESM import of `node:http` builds the
 * builtin's ESM facade, which reads every export, and three of them (`WebSocket`, `CloseEvent`, `MessageEvent`) are
 * getters that load undici: ~35 ms of a cold start on the image's Node.js 24, for a WebSocket client serve never
 * makes (`node --cpu-prof`: node:http `lazyUndici` under the facade's `syncExports`). `require` reads no export.
 * Only the names Quartermaster imports are here: a new one fails the bundle's build until it is added.
 */
import { createRequire } from "node:module";

const http = createRequire(import.meta.url)("node:http") as typeof import("node:http");

export const { Agent, createServer, request } = http;
