/**
 * The `serve` bundle (issue 51, cold start): src/cli/serve-main.ts (the program with `serve` alone, src/cli/serve-cli.ts)
 * and what it imports, dependencies included, bundled by esbuild into one file, dist/src/bundle/serve.mjs.
 * bin/quartermaster.js runs it for `serve`, so a starting webhook reads one file instead of ~140 (yaml, prom-client,
 * pino, commander, dist/ itself), where most of its start went in module resolution and loading. Every other
 * command runs dist/src/cli. Written by `npm run build` and by the release (release/build.ts).
 *
 * - @kubernetes/client-node stays outside: `serve` never loads it to answer (src/kube/rest.ts reads jobs), and it is
 *   loaded off the start path when a kubeconfig needs it; the package's node_modules still holds it.
 * - The output directory sits at the depth of dist/src/cli, so the paths src/cli/build-info.ts makes from
 *   `import.meta.url` (dist/build-info.json, the package root) are the same from the bundle.
 * - esbuild's output depends on its inputs only (module paths relative to the root, symlinks kept): two builds of
 *   one commit, in any directories, are the same bytes, as the release requires.
 *
 *   node --import tsx release/bundle.ts [ROOT]
 */
import { rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build, type Plugin } from "esbuild";

/** Where the bundle goes, relative to the package root; bin/quartermaster.js names the same file. */
export const BUNDLE_DIR = "dist/src/bundle";
export const BUNDLE_ENTRY = `${BUNDLE_DIR}/serve.mjs`;

/** The packages left to node_modules. */
export const BUNDLE_EXTERNAL = ["@kubernetes/client-node"];

/**
 * Modules replaced by stand-ins (esbuild's `alias` takes package names only, so a plugin): prom-client's Pushgateway,
 * which `serve` never runs, by one that says so when used (./no-pushgateway.ts); and `node:http` as our own modules
 * import it, by the same module loaded with `require` (./node-http.ts: on Node.js 22+ the ESM import loads undici).
 */
const standIns = (root: string): Plugin => ({
  name: "quartermaster-stand-ins",
  setup(b) {
    b.onResolve({ filter: /^\.\/lib\/pushgateway$/ }, (args) =>
      /[\\/]prom-client[\\/]index\.js$/.test(args.importer) ? { path: join(root, "release/no-pushgateway.ts") } : undefined,
    );
    b.onResolve({ filter: /^(node:)?http$/ }, (args) =>
      args.kind === "import-statement" && !args.importer.endsWith("node-http.ts") ? { path: join(root, "release/node-http.ts") } : undefined,
    );
  },
});

/**
 * Bundles `root`/src/cli/serve-main.ts into `root`/dist/src/bundle/serve.mjs, or into `outdir` (replacing what was
 * there). Returns the files it read, relative to `root` (what a build of the bundle needs: the Dockerfile's build
 * stage copies them). `plugins`: more esbuild plugins, after the stand-ins (a test instruments modules with one).
 */
export async function bundleServe(root: string, outdir = join(root, BUNDLE_DIR), plugins: readonly Plugin[] = []): Promise<string[]> {
  rmSync(outdir, { recursive: true, force: true });
  const result = await build({
    absWorkingDir: root,
    entryPoints: { serve: "src/cli/serve-main.ts" },
    outdir,
    outExtension: { ".js": ".mjs" },
    bundle: true,
    // One file: ~45 chunks cost ~0.25 ms each to resolve, read, compile and link, and a module reached only by
    // `import()` (yaml for a kubeconfig, a --policy file's checker, the ledger index's code) is still evaluated only
    // when imported (esbuild wraps it in a lazy initializer), so it costs a start only its pre-parse.
    splitting: false,
    format: "esm",
    platform: "node",
    target: "node20.6",
    external: BUNDLE_EXTERNAL,
    // prom-client's exemplars' tracing API, never used here: a stand-in that says so (./no-otel.ts).
    alias: { "@opentelemetry/api": "./release/no-otel.ts" },
    plugins: [standIns(root), ...plugins],
    // Paths as seen from the root (node_modules/x), not where a symlinked node_modules really is: the output holds
    // module paths, and the release builds in a fresh temporary directory whose node_modules is a symlink.
    preserveSymlinks: true,
    // CommonJS dependencies (prom-client, pino, yaml's CJS build) call `require` for Node's own modules.
    banner: { js: 'import { createRequire as __qmCreateRequire } from "node:module";\nconst require = __qmCreateRequire(import.meta.url);' },
    // Whitespace and syntax only, the files about a third smaller to read and parse. Names are not pinned (esbuild's
    // keepNames): its `__name(fn, "fn")` runs each time a named inner function is made, ~3 % of a review's CPU in
    // a profile of bench:admission. The names stay where they are written; where two modules of a chunk share a name,
    // esbuild numbers one (a stack trace's `diff2`), and every error class of ours says its `name` itself.
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: "eof",
    logLevel: "warning",
    metafile: true,
  });
  return Object.keys(result.metafile.inputs);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await bundleServe(resolve(process.argv[2] ?? join(import.meta.dirname, "..")));
}
