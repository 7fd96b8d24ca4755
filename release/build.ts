/**
 * `npm run release`: builds the release of the commit checked out (HEAD), reproducibly, into release/out/:
 *
 *   quartermaster-VERSION.oci.tar        the image, an OCI image layout in a tar (podman load, crane push, skopeo)
 *   quartermaster-VERSION.cdx.json       its SBOM (CycloneDX: npm sbom of the production dependencies, plus Node.js
 *                                        and the Debian packages)
 *   quartermaster-VERSION.tgz            the Helm chart, version VERSION, its values pinning the image by digest
 *   release.json                         version, commit, SOURCE_DATE_EPOCH, the image's digest and inputs
 *   SHA256SUMS                           sha256sum of the four above
 *
 * From the registries this machine reaches and nothing else: the npm registry (Node.js, dependencies), Debian's
 * archive (apt-get download) and, when QM_HELM_BIN is unset, the Go module proxy to build helm
 * (test/e2e/helm/build.sh). No Docker daemon, no image registry. The sources are `git archive HEAD`, so what is
 * built is the commit, whatever the working tree holds. Every timestamp is SOURCE_DATE_EPOCH (default: the commit's
 * time), so a second run gives the same bytes (test/e2e/release.test.ts). docs/release.md says how to verify.
 *
 * Env: SOURCE_DATE_EPOCH, QM_RELEASE_OUT (default release/out), QM_RELEASE_IMAGE_REPOSITORY (the repository the
 * chart's values name, default "quartermaster"), QM_HELM_BIN, QM_RELEASE_CACHE (downloaded inputs, default
 * ${XDG_CACHE_HOME:-~/.cache}/quartermaster/release-inputs).
 */
import { execFileSync, type ExecFileSyncOptions } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { DEBIAN, LAYERS, NODE, RUNTIME, USER, type DebianPackage } from "./image.js";

const ROOT = resolve(import.meta.dirname, "..");
const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip";

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
}

function log(msg: string): void {
  process.stderr.write(`release: ${msg}\n`);
}

function run(cmd: string, args: string[], opts: ExecFileSyncOptions = {}): string {
  return execFileSync(cmd, args, { stdio: ["ignore", "pipe", "inherit"], maxBuffer: 1 << 28, ...opts }).toString();
}

function sha256File(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/** GNU tar options that make an archive depend on the files' names, content and mode only. */
function tarFlags(epoch: number): string[] {
  return [
    "--sort=name",
    "--format=posix",
    `--mtime=@${epoch}`,
    "--owner=0",
    "--group=0",
    "--numeric-owner",
    "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
    // Modes as a umask of 022 gives, whatever the umask of the machine that built it.
    "--mode=u+rwX,go+rX,go-w",
  ];
}

/**
 * Tars DIR's top-level entries (sorted, no leading ./) into OUT, owned by root, but HOME (the non-root user's,
 * appended owned by that user) and TMP (appended with its mode 1777 kept, which --mode would lose).
 */
function tarDir(dir: string, out: string, epoch: number, special: { home?: string; tmp?: string } = {}): void {
  const skip = new Set([special.home, special.tmp]);
  const rootEntries = readdirSync(dir)
    .filter((e) => !skip.has(e))
    .sort();
  run("tar", ["-C", dir, ...tarFlags(epoch), "-cf", out, "--", ...rootEntries]);
  if (special.home) {
    const flags = tarFlags(epoch).map((f) => (f === "--owner=0" ? `--owner=${USER.uid}` : f === "--group=0" ? `--group=${USER.gid}` : f));
    run("tar", ["-C", dir, ...flags, "-rf", out, "--", special.home]);
  }
  if (special.tmp) {
    run("tar", ["-C", dir, ...tarFlags(epoch).filter((f) => !f.startsWith("--mode")), "-rf", out, "--", special.tmp]);
  }
}

function gzip(path: string): string {
  run("gzip", ["-n", "-f", path]);
  return `${path}.gz`;
}

function writeBlob(blobs: string, data: Buffer | string, mediaType: string): Descriptor {
  const buf = typeof data === "string" ? Buffer.from(data) : data;
  const hex = createHash("sha256").update(buf).digest("hex");
  writeFileSync(join(blobs, hex), buf);
  return { mediaType, digest: `sha256:${hex}`, size: buf.length };
}

function sourceDateEpoch(): number {
  const env = process.env.SOURCE_DATE_EPOCH;
  const value = env && env !== "" ? env : run("git", ["-C", ROOT, "log", "-1", "--format=%ct"]).trim();
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`SOURCE_DATE_EPOCH: not a number of seconds: ${value}`);
  return n;
}

function cacheDir(): string {
  const base = process.env.XDG_CACHE_HOME && process.env.XDG_CACHE_HOME !== "" ? process.env.XDG_CACHE_HOME : join(homedir(), ".cache");
  const dir =
    process.env.QM_RELEASE_CACHE && process.env.QM_RELEASE_CACHE !== "" ? process.env.QM_RELEASE_CACHE : join(base, "quartermaster", "release-inputs");
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** The commit's sources, built: WORK/src holds `git archive HEAD` and its dist/. */
function buildSources(work: string): { commit: string; version: string } {
  const src = join(work, "src");
  mkdirSync(src);
  const commit = run("git", ["-C", ROOT, "rev-parse", "HEAD"]).trim();
  if (run("git", ["-C", ROOT, "status", "--porcelain", "--untracked-files=no"]).trim() !== "") {
    log("the working tree has uncommitted changes: they are not in the release (it builds HEAD)");
  }
  const archive = join(work, "src.tar");
  run("git", ["-C", ROOT, "archive", "--format=tar", "-o", archive, "HEAD"]);
  run("tar", ["-xf", archive, "-C", src]);
  rmSync(archive);
  // The compiler and its type packages from the repository's own install (`npm ci`): the build needs nothing else.
  symlinkSync(join(ROOT, "node_modules"), join(src, "node_modules"));
  log("npm run build (tsc -p tsconfig.build.json)");
  run(process.execPath, [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.build.json"], { cwd: src });
  // The `serve` bundle bin/quartermaster.js runs (release/bundle.ts: the cold start); esbuild's output is the same
  // bytes for the same sources in any directory.
  log("serve bundle (release/bundle.ts, esbuild)");
  run(process.execPath, ["--import", "tsx", join(src, "release", "bundle.ts"), src], { cwd: src });
  const version = (JSON.parse(readFileSync(join(src, "package.json"), "utf8")) as { version: string }).version;
  return { commit, version };
}

/** WORK/app: package.json, production dependencies, dist/ and bin/, as the Dockerfile copies them to /app. */
function stageApp(work: string): void {
  const src = join(work, "src");
  const app = join(work, "rootfs-deps", "app");
  mkdirSync(app, { recursive: true });
  for (const f of ["package.json", "package-lock.json"]) cpSync(join(src, f), join(app, f));
  log("npm ci --omit=dev --ignore-scripts");
  run("npm", ["ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: app });
  // The Dockerfile copies node_modules alone from its deps stage, and package.json from the sources.
  for (const f of ["package.json", "package-lock.json"]) rmSync(join(app, f), { force: true });
  const appLayer = join(work, "rootfs-app", "app");
  mkdirSync(appLayer, { recursive: true });
  cpSync(join(src, "dist"), join(appLayer, "dist"), { recursive: true });
  cpSync(join(src, "bin"), join(appLayer, "bin"), { recursive: true });
  cpSync(join(src, "package.json"), join(appLayer, "package.json"));
}

/** Node.js from the npm registry into WORK/rootfs-nodejs/nodejs/bin/node. */
function stageNode(work: string, cache: string): void {
  const tgz = join(cache, `${NODE.package}-${NODE.version}.tgz`);
  if (!existsSync(tgz)) {
    log(`npm pack ${NODE.package}@${NODE.version}`);
    run("npm", ["pack", `${NODE.package}@${NODE.version}`, "--pack-destination", cache, "--loglevel=error"], { cwd: work });
  }
  const integrity = `sha512-${createHash("sha512").update(readFileSync(tgz)).digest("base64")}`;
  if (integrity !== NODE.integrity) throw new Error(`${tgz}: integrity ${integrity}, release/image.ts pins ${NODE.integrity}`);
  const unpacked = join(work, "node-package");
  mkdirSync(unpacked);
  run("tar", ["-xzf", tgz, "-C", unpacked, "package/bin/node", "package/LICENSE"]);
  const dest = join(work, "rootfs-nodejs", "nodejs");
  mkdirSync(join(dest, "bin"), { recursive: true });
  renameSync(join(unpacked, "package", "bin", "node"), join(dest, "bin", "node"));
  renameSync(join(unpacked, "package", "LICENSE"), join(dest, "LICENSE"));
}

/** Whether this build has already run `apt-get update` (once at most). */
let aptUpdated = false;

/**
 * `apt-get download` of the pinned version. A machine whose apt lists are older than the pin (a fresh one: its image's
 * lists name the versions of its build day) gets one `apt-get update`, as root only, and one more try.
 */
function download(cache: string, p: DebianPackage): void {
  const args = ["download", "-q", "-o", "APT::Sandbox::User=root", `${p.name}=${p.version}`];
  try {
    run("apt-get", args, { cwd: cache });
  } catch (err) {
    if (aptUpdated || process.getuid?.() !== 0) throw err;
    aptUpdated = true;
    log(`${p.name}=${p.version} is not in the apt lists: apt-get update`);
    run("apt-get", ["update", "-qq"]);
    run("apt-get", args, { cwd: cache });
  }
}

function debFile(cache: string, p: DebianPackage): string {
  // apt-get download names files NAME_VERSION_ARCH.deb with the version's ':' escaped as %3a.
  const path = join(cache, `${p.name}_${p.version.replace(/:/g, "%3a")}_${p.arch}.deb`);
  if (!existsSync(path)) {
    log(`apt-get download ${p.name}=${p.version}`);
    try {
      download(cache, p);
    } catch {
      const policy = run("apt-cache", ["policy", p.name]);
      throw new Error(
        `apt-get download ${p.name}=${p.version} failed. The apt lists (apt-get update) must name that version; apt-cache policy says:\n${policy}` +
          "If Debian replaced it, pin the new version and its sha256 in release/image.ts (DEBIAN).",
      );
    }
  }
  const sum = sha256File(path);
  if (sum !== p.sha256) throw new Error(`${path}: sha256 ${sum}, release/image.ts pins ${p.sha256}`);
  return path;
}

/**
 * WORK/rootfs-base: the Debian packages unpacked (no maintainer scripts run: none are needed but
 * ca-certificates', whose bundle is made here as update-ca-certificates makes it), /etc/passwd and /etc/group
 * naming the non-root user, /tmp, and no shell.
 */
function stageBase(work: string, cache: string): void {
  const base = join(work, "rootfs-base");
  mkdirSync(base);
  for (const p of DEBIAN) run("dpkg-deb", ["-x", debFile(cache, p), base]);
  // Documentation other than licences, gdb's and python's helpers, the CA update hook (a shell script) and its config: nothing runs them.
  for (const dir of ["usr/share/gcc", "usr/share/man", "usr/share/lintian", "usr/share/gdb", "usr/sbin", "etc/ca-certificates", "usr/share/info"]) {
    rmSync(join(base, dir), { recursive: true, force: true });
  }
  const docs = join(base, "usr/share/doc");
  for (const pkg of readdirSync(docs, { withFileTypes: true })) {
    // libgcc-s1's and libstdc++6's are links to gcc-12-base's directory, a package not installed here.
    if (!pkg.isDirectory()) rmSync(join(docs, pkg.name));
    else for (const f of readdirSync(join(docs, pkg.name))) if (f !== "copyright") rmSync(join(docs, pkg.name, f), { recursive: true });
  }
  // update-ca-certificates (ca-certificates, sbin/update-ca-certificates) concatenates the certificates
  // /etc/ca-certificates.conf selects, all of mozilla/ by default, in that file's (sorted) order.
  const mozilla = join(base, "usr/share/ca-certificates/mozilla");
  const pems = readdirSync(mozilla)
    .filter((f) => f.endsWith(".crt"))
    .sort()
    .map((f) => readFileSync(join(mozilla, f), "utf8"));
  mkdirSync(join(base, "etc/ssl/certs"), { recursive: true });
  writeFileSync(join(base, "etc/ssl/certs/ca-certificates.crt"), pems.map((p) => (p.endsWith("\n") ? p : `${p}\n`)).join(""));
  writeFileSync(
    join(base, "etc/passwd"),
    `root:x:0:0:root:/root:/sbin/nologin\n${USER.name}:x:${USER.uid}:${USER.gid}:${USER.name}:${USER.home}:/sbin/nologin\n`,
  );
  writeFileSync(join(base, "etc/group"), `root:x:0:\n${USER.name}:x:${USER.gid}:\n`);
  mkdirSync(join(base, "tmp"));
  mkdirSync(join(base, USER.home), { recursive: true });
}

/** The image: layers from WORK/rootfs-*, config and manifest, as an OCI image layout in WORK/layout. */
function assembleImage(work: string, epoch: number, version: string): { manifest: Descriptor; layout: string } {
  const layout = join(work, "layout");
  const blobs = join(layout, "blobs", "sha256");
  mkdirSync(blobs, { recursive: true });
  const roots: Record<string, string> = { base: "rootfs-base", nodejs: "rootfs-nodejs", dependencies: "rootfs-deps", app: "rootfs-app" };
  const layers: Descriptor[] = [];
  const diffIds: string[] = [];
  for (const layer of LAYERS) {
    const tar = join(work, `${layer.name}.tar`);
    const dir = join(work, roots[layer.name]!);
    if (layer.name === "base") {
      chmodSync(join(dir, "tmp"), 0o1777);
      tarDir(dir, tar, epoch, { home: "home", tmp: "tmp" });
    } else tarDir(dir, tar, epoch);
    diffIds.push(`sha256:${sha256File(tar)}`);
    const gz = gzip(tar);
    layers.push(writeBlob(blobs, readFileSync(gz), OCI_LAYER));
    rmSync(gz);
    log(`layer ${layer.name}: ${layers[layers.length - 1]!.digest} (${Math.round(layers[layers.length - 1]!.size / 1e6)} MB)`);
  }
  const created = new Date(epoch * 1000).toISOString().replace(/\.000Z$/, "Z");
  // Written here rather than with `crane mutate`, which sets entrypoint, user and env but not `created` nor the
  // layers' history (go-containerregistry, cmd/crane/cmd/mutate.go); the test validates the result with
  // `crane validate` after pushing it.
  const config = {
    created,
    architecture: "amd64",
    os: "linux",
    config: {
      User: RUNTIME.user,
      ExposedPorts: Object.fromEntries(RUNTIME.exposedPorts.map((p) => [p, {}])),
      Env: [...RUNTIME.env],
      Entrypoint: [...RUNTIME.entrypoint],
      Cmd: [...RUNTIME.cmd],
      WorkingDir: RUNTIME.workdir,
      Labels: {
        "org.opencontainers.image.title": "quartermaster",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.licenses": "Apache-2.0",
      },
    },
    rootfs: { type: "layers", diff_ids: diffIds },
    history: LAYERS.map((l) => ({ created, created_by: l.createdBy })),
  };
  const configDesc = writeBlob(blobs, JSON.stringify(config), OCI_CONFIG);
  const manifest = { schemaVersion: 2, mediaType: OCI_MANIFEST, config: configDesc, layers };
  const manifestDesc = writeBlob(blobs, JSON.stringify(manifest), OCI_MANIFEST);
  const index = {
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.index.v1+json",
    manifests: [{ ...manifestDesc, annotations: { "org.opencontainers.image.ref.name": version } }],
  };
  writeFileSync(join(layout, "index.json"), JSON.stringify(index));
  writeFileSync(join(layout, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  return { manifest: manifestDesc, layout };
}

interface CycloneDx {
  serialNumber?: string;
  metadata?: { timestamp?: string };
  components?: unknown[];
}

/**
 * The SBOM: `npm sbom` of the production dependencies, made reproducible (its serial number, random, and its
 * timestamp, the time of the run, become functions of the image digest and SOURCE_DATE_EPOCH), with Node.js and
 * the Debian packages added as components.
 */
function sbom(src: string, epoch: number, imageDigest: string): string {
  // From the lockfile: npm sbom of the installed tree reports the omitted dev dependencies as missing (npm 11).
  // `npm ci --omit=dev` installed exactly the lockfile's production tree, so the two agree.
  const args = ["sbom", "--sbom-format", "cyclonedx", "--omit", "dev", "--sbom-type", "application", "--package-lock-only"];
  const raw = run("npm", args, { cwd: src });
  const doc = JSON.parse(raw) as CycloneDx;
  const h = createHash("sha256").update(imageDigest).digest("hex");
  doc.serialNumber = `urn:uuid:${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
  doc.metadata = { ...doc.metadata, timestamp: new Date(epoch * 1000).toISOString() };
  doc.components = [
    ...(doc.components ?? []),
    {
      type: "platform",
      name: "node",
      version: NODE.version,
      purl: `pkg:npm/${NODE.package}@${NODE.version}`,
      "bom-ref": `${NODE.package}@${NODE.version}`,
      licenses: [{ license: { id: "MIT" } }],
    },
    ...DEBIAN.map((p) => ({
      type: "library",
      name: p.name,
      version: p.version,
      purl: `pkg:deb/debian/${p.name}@${encodeURIComponent(p.version)}?arch=${p.arch}&distro=debian-12`,
      "bom-ref": `deb:${p.name}@${p.version}`,
      hashes: [{ alg: "SHA-256", content: p.sha256 }],
    })),
  ];
  return `${JSON.stringify(doc, null, 2)}\n`;
}

function helmBin(): string {
  const env = process.env.QM_HELM_BIN;
  if (env && env !== "") return env;
  return join(run("bash", [join(ROOT, "test/e2e/helm/build.sh")]).trim(), "helm");
}

/**
 * The chart, its version and appVersion the package's, its values naming the image by digest. `helm package` puts
 * the time of the run on every entry (helm.sh/helm/v3, pkg/chartutil/save.go, writeToTar), so its archive is
 * unpacked and packed again with the layers' tar options: same files, reproducible bytes.
 */
function chart(work: string, out: string, epoch: number, version: string, imageDigest: string): string {
  const src = join(work, "src", "charts", "quartermaster");
  const values = join(src, "values.yaml");
  const repository =
    process.env.QM_RELEASE_IMAGE_REPOSITORY && process.env.QM_RELEASE_IMAGE_REPOSITORY !== "" ? process.env.QM_RELEASE_IMAGE_REPOSITORY : "quartermaster";
  const text = readFileSync(values, "utf8");
  const pinned = text.replace(
    /^image:\n {2}repository: .*\n {2}tag: .*\n {2}digest: .*\n/m,
    `image:\n  repository: ${repository}\n  tag: "${version}"\n  digest: "${imageDigest}"\n`,
  );
  if (pinned === text) throw new Error(`${values}: no image.repository, tag and digest lines to pin`);
  writeFileSync(values, pinned);
  const packaged = join(work, "helm-package");
  mkdirSync(packaged);
  run(helmBin(), ["package", src, "--version", version, "--app-version", version, "-d", packaged]);
  const unpacked = join(work, "chart");
  mkdirSync(unpacked);
  run("tar", ["-xzf", join(packaged, `quartermaster-${version}.tgz`), "-C", unpacked]);
  const files = run("find", ["quartermaster", "-type", "f"], { cwd: unpacked }).trim().split("\n").sort();
  const tar = join(work, `quartermaster-${version}.tar`);
  run("tar", ["-C", unpacked, ...tarFlags(epoch), "--no-recursion", "-cf", tar, "--", ...files]);
  const name = `quartermaster-${version}.tgz`;
  renameSync(gzip(tar), join(out, name));
  return name;
}

function main(): void {
  const started = Date.now();
  const epoch = sourceDateEpoch();
  const out = resolve(process.env.QM_RELEASE_OUT && process.env.QM_RELEASE_OUT !== "" ? process.env.QM_RELEASE_OUT : join(ROOT, "release", "out"));
  const cache = cacheDir();
  const work = mkdtempSync(join(tmpdir(), "qm-release-"));
  try {
    const { commit, version } = buildSources(work);
    log(`quartermaster ${version} at ${commit}, SOURCE_DATE_EPOCH=${epoch}`);
    stageApp(work);
    stageNode(work, cache);
    stageBase(work, cache);
    const { manifest, layout } = assembleImage(work, epoch, version);
    rmSync(out, { recursive: true, force: true });
    mkdirSync(out, { recursive: true });
    const image = `quartermaster-${version}.oci.tar`;
    const layoutFiles = ["blobs", "index.json", "oci-layout"];
    run("tar", ["-C", layout, ...tarFlags(epoch), "-cf", join(out, image), "--", ...layoutFiles]);
    const sbomName = `quartermaster-${version}.cdx.json`;
    writeFileSync(join(out, sbomName), sbom(join(work, "src"), epoch, manifest.digest));
    const chartName = chart(work, out, epoch, version, manifest.digest);
    const release = {
      version,
      commit,
      sourceDateEpoch: epoch,
      image: { archive: image, digest: manifest.digest, ref: `quartermaster:${version}@${manifest.digest}` },
      chart: chartName,
      sbom: sbomName,
      node: `${NODE.package}@${NODE.version}`,
      debian: DEBIAN.map((p) => `${p.name}=${p.version}`),
    };
    writeFileSync(join(out, "release.json"), `${JSON.stringify(release, null, 2)}\n`);
    const names = [image, sbomName, chartName, "release.json"].sort();
    writeFileSync(join(out, "SHA256SUMS"), names.map((n) => `${sha256File(join(out, n))}  ${n}\n`).join(""));
    log(`image ${manifest.digest}`);
    log(`done in ${Math.round((Date.now() - started) / 1000)} s: ${out}`);
    process.stdout.write(`${out}\n`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

main();
