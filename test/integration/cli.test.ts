import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { connect as tlsConnect } from "node:tls";
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, it } from "node:test";
import { createCertificateAuthority, type KeyType } from "../../src/certs/generate.js";
import { NO_KUBECONFIG } from "../../src/core/errors.js";
import { call, makeCerts, postJson } from "../fixtures/https.js";
import { review } from "../fixtures/reviews.js";

const ROOT = resolve(import.meta.dirname, "../..");
const CLI = join(ROOT, "src/cli/main.ts");

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function run(
  args: string[],
  opts: { onStdout?: (text: string, child: ReturnType<typeof spawn>) => void; timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<Run> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", CLI, ...args], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
      ...(opts.env ? { env: opts.env } : {}),
    });
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`quartermaster ${args.join(" ")} did not exit; stdout: ${stdout}; stderr: ${stderr}`));
    }, opts.timeoutMs ?? 20_000);
    child.stdout.on("data", (c: Buffer) => {
      stdout += c.toString();
      opts.onStdout?.(stdout, child);
    });
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code, signal, stdout, stderr });
    });
  });
}

const tmp = (): string => mkdtempSync(join(tmpdir(), "qm-cli-"));
const BAD_POLICY = "clusterSpec:\n  enabled: maybe\nreconciler:\n  maxDeletionsPerPass: 0\nbogus: 1\n";

describe("quartermaster CLI", () => {
  it("policy check on a valid file → exit 0", async () => {
    const f = join(tmp(), "p.yaml");
    writeFileSync(f, "clusterSpec:\n  clusterDomain: cluster.local\n");
    const r = await run(["policy", "check", f]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /p\.yaml: valid/);
  });

  it("policy check on an invalid file → exit 1 and every error with its path", async () => {
    const f = join(tmp(), "bad.yaml");
    writeFileSync(f, BAD_POLICY);
    const r = await run(["policy", "check", f]);
    assert.equal(r.code, 1);
    for (const want of ["(document): unknown field 'bogus'", "clusterSpec.enabled: must be boolean", "reconciler.maxDeletionsPerPass: must be >= 1"]) {
      assert.ok(r.stderr.includes(want), `missing ${want} in ${r.stderr}`);
    }
  });

  it("policy check on a missing file → exit 1 naming it", async () => {
    const r = await run(["policy", "check", "/nonexistent/policy.yaml"]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /cannot read: ENOENT/);
  });

  it("an unknown command or flag → exit 2 with usage", async () => {
    const r = await run(["frobnicate"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /unknown command 'frobnicate'/);
    assert.match(r.stderr, /Usage: quartermaster/);
    const f = await run(["serve", "--tls-cert", "x", "--tls-key", "y", "--colour", "red"]);
    assert.equal(f.code, 2);
    assert.match(f.stderr, /unknown option '--colour'/i);
  });

  const usage: Array<[string, string[], RegExp]> = [
    ["ledger -o yaml", ["ledger", "-o", "yaml"], /ledger: -o must be table or json/],
    ["reconcile with neither --once nor --schedule", ["reconcile"], /give exactly one of --once, --schedule CRON and --watch/],
    ["reconcile --schedule --dry-run", ["reconcile", "--schedule", "*/5 * * * *", "--dry-run"], /--dry-run goes with --once/],
    ["reconcile --schedule that is not cron", ["reconcile", "--schedule", "every five minutes"], /is not a cron expression/],
    ["reconcile --once with a metrics port", ["reconcile", "--once", "--metrics-port", "9091"], /--metrics-port goes with --schedule/],
    ["reconcile --schedule with a metrics port out of range", ["reconcile", "--schedule", "*/5 * * * *", "--metrics-port", "70000"], /metrics-port/],
    ["reconcile --watch --once", ["reconcile", "--watch", "--once"], /--once does not go with --watch/],
    ["reconcile --watch --dry-run", ["reconcile", "--watch", "--dry-run"], /--dry-run does not go with --watch/],
    [
      "reconcile --watch with a metrics port out of range (the flag is --watch's too)",
      ["reconcile", "--watch", "--metrics-port", "70000"],
      /--metrics-port must be an integer from 0 to 65535, got 70000/,
    ],
    ["reconcile --watch with a 1 s lease", ["reconcile", "--watch", "--lease-seconds", "1"], /--lease-seconds must be an integer from 2 to 3600, got 1/],
    [
      "serve --ledger-refresh-seconds=90000",
      ["serve", "--tls-cert", "x", "--tls-key", "y", "--ledger-refresh-seconds=90000"],
      /--ledger-refresh-seconds must be an integer from 0 to 86400, got 90000/,
    ],
  ];
  for (const [name, args, message] of usage) {
    it(`${name} → exit 2 with a message, before any cluster is contacted`, async () => {
      const r = await run(args);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, message);
    });
  }

  it("serve with an invalid policy → exits non-zero at start, listing every error", async () => {
    const dir = tmp();
    const files = await makeCerts(dir);
    writeFileSync(join(dir, "bad.yaml"), BAD_POLICY);
    const r = await run([
      "serve",
      "--port",
      "0",
      "--host",
      "127.0.0.1",
      "--tls-cert",
      files.certFile,
      "--tls-key",
      files.keyFile,
      "--policy",
      join(dir, "bad.yaml"),
    ]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /unknown field 'bogus'/);
    assert.match(r.stderr, /clusterSpec\.enabled: must be boolean/);
    assert.match(r.stderr, /reconciler\.maxDeletionsPerPass: must be >= 1/);
    assert.doesNotMatch(r.stdout, /serving/);
  });

  it("serve with a missing key file → exits 1 naming the file", async () => {
    const files = await makeCerts();
    const r = await run(["serve", "--port", "0", "--tls-cert", files.certFile, "--tls-key", "/nonexistent/tls.key"]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /\/nonexistent\/tls\.key/);
  });

  it("certs generate writes a CA and a serving pair for the Service; keys are private", async () => {
    const out = join(tmp(), "certs");
    const r = await run(["certs", "generate", "--service", "qm-webhook", "--namespace", "qm", "--out", out, "--ip", "127.0.0.1", "--days", "30"]);
    assert.equal(r.code, 0, r.stderr);
    const leaf = new X509Certificate(readFileSync(join(out, "tls.crt")));
    const ca = new X509Certificate(readFileSync(join(out, "ca.crt")));
    assert.ok(leaf.checkIssued(ca));
    assert.equal(leaf.subjectAltName, "DNS:qm-webhook, DNS:qm-webhook.qm, DNS:qm-webhook.qm.svc, DNS:qm-webhook.qm.svc.cluster.local, IP Address:127.0.0.1");
    assert.equal(statSync(join(out, "tls.key")).mode & 0o777, 0o600);
    assert.equal(statSync(join(out, "ca.key")).mode & 0o777, 0o600);
  });

  it("serve answers a review, then SIGTERM drains and exits 0", async () => {
    const files = await makeCerts();
    let port = 0;
    let answered: Promise<number> | undefined;
    const r = await run(["serve", "--port", "0", "--host", "127.0.0.1", "--tls-cert", files.certFile, "--tls-key", files.keyFile], {
      onStdout: (text, child) => {
        const m = /serving https:\/\/127\.0\.0\.1:(\d+)/.exec(text);
        if (m && !answered) {
          port = Number(m[1]);
          answered = (async () => {
            const reply = await postJson(port, "/mutate/pods", review({ uid: "cli-1" }), files.certs.ca.certPem);
            assert.equal((await call(port, { method: "GET", path: "/readyz", ca: files.certs.ca.certPem })).status, 200);
            child.kill("SIGTERM");
            return reply.json().response.uid === "cli-1" ? reply.status : -1;
          })();
        }
      },
    });
    assert.equal(await answered, 200);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /"signal":"SIGTERM"/);
    assert.match(r.stdout, /"msg":"server closed"/);
  });

  // --http2 offers h2 by ALPN; without it, HTTP/1.1 only.
  for (const [flags, want] of [
    [["--http2"], "h2"],
    [[], "http/1.1"],
  ] as const) {
    it(`serve ${flags.join(" ") || "(no --http2)"}: ALPN settles on ${want} for a client offering h2 and http/1.1`, async () => {
      const files = await makeCerts();
      let settled: Promise<string | false> | undefined;
      const r = await run(["serve", "--port", "0", "--host", "127.0.0.1", "--tls-cert", files.certFile, "--tls-key", files.keyFile, ...flags], {
        onStdout: (text, child) => {
          const m = /serving https:\/\/127\.0\.0\.1:(\d+)/.exec(text);
          if (m && !settled) {
            settled = new Promise<string | false>((resolve, reject) => {
              const socket = tlsConnect(
                { host: "127.0.0.1", port: Number(m[1]), ca: files.certs.ca.certPem, servername: "localhost", ALPNProtocols: ["h2", "http/1.1"] },
                () => {
                  resolve(socket.alpnProtocol ?? false);
                  socket.destroy();
                  child.kill("SIGTERM");
                },
              );
              socket.once("error", reject);
            });
          }
        },
      });
      assert.equal(await settled, want);
      assert.equal(r.code, 0, r.stderr);
    });
  }

  // No --kubeconfig, no $KUBECONFIG, an empty HOME (no ~/.kube/config) and not in a cluster: every command that
  // needs the cluster says what to do instead of client-node's "HTTP protocol is not allowed when skipTLSVerify ...".
  const caFile = async (): Promise<string> => {
    const f = join(tmp(), "ca.crt");
    writeFileSync(f, (await createCertificateAuthority("no-cluster", 30)).certPem);
    return f;
  };
  const noCluster: Array<[string, () => string[] | Promise<string[]>]> = [
    ["ledger", () => ["ledger"]],
    ["reconcile --once --dry-run", () => ["reconcile", "--once", "--dry-run"]],
    ["certs ensure", () => ["certs", "ensure", "--service", "s", "--namespace", "n", "--dry-run"]],
    ["certs install", async () => ["certs", "install", "--ca", await caFile()]],
  ];
  const bareEnv = (): NodeJS.ProcessEnv => {
    const env: NodeJS.ProcessEnv = { ...process.env, HOME: tmp() };
    for (const k of ["KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"]) delete env[k];
    return env;
  };
  for (const [name, args] of noCluster) {
    it(`${name} without a kubeconfig or cluster → exit 1: "${NO_KUBECONFIG}"`, async () => {
      const r = await run(await args(), { env: bareEnv() });
      assert.equal(r.code, 1, r.stderr);
      // Before it, a command that waits on the cluster may say what for (docs/cli.md); nothing else.
      const lines = r.stderr.trim().split("\n");
      assert.equal(lines.at(-1), `quartermaster: ${NO_KUBECONFIG}`);
      for (const l of lines.slice(0, -1)) assert.match(l, /^quartermaster: [a-z ]+: reading .* \(each request up to 30s, --request-timeout\)$/);
    });
  }

  it("doctor without a kubeconfig or cluster → critical, the finding says what to do", async () => {
    const r = await run(["doctor"], { env: bareEnv() });
    assert.equal(r.code, 2, r.stderr);
    assert.ok(r.stdout.includes(NO_KUBECONFIG), r.stdout);
    assert.doesNotMatch(r.stdout + r.stderr, /skipTLSVerify/);
  });
});

describe("certs generate with a given CA and malformed flags", () => {
  const generate = (out: string, ...extra: string[]) => run(["certs", "generate", "--service", "qm-webhook", "--namespace", "qm", "--out", out, ...extra]);
  const writePair = (dir: string, pair: { certPem: string; keyPem: string }): { cert: string; key: string } => {
    writeFileSync(join(dir, "ca.crt"), pair.certPem);
    writeFileSync(join(dir, "ca.key"), pair.keyPem);
    return { cert: join(dir, "ca.crt"), key: join(dir, "ca.key") };
  };
  const day = 86400_000;

  const refused: Array<[string, () => Promise<{ cert: string; key: string }>, RegExp]> = [
    [
      "a leaf certificate as the CA (with its own key)",
      async () => {
        const first = join(tmp(), "first");
        assert.equal((await generate(first)).code, 0);
        return { cert: join(first, "tls.crt"), key: join(first, "tls.key") };
      },
      /the CA certificate is not a CA/,
    ],
    [
      "a CA with another CA's key",
      async () => ({
        cert: writePair(tmp(), await createCertificateAuthority("a", 30)).cert,
        key: writePair(tmp(), await createCertificateAuthority("b", 30)).key,
      }),
      /the CA key does not match its certificate/,
    ],
    ["an expired CA", async () => writePair(tmp(), await createCertificateAuthority("old", 1, new Date(Date.now() - 3 * day))), /the CA expired at /],
    [
      "a CA not valid yet",
      async () => writePair(tmp(), await createCertificateAuthority("future", 30, new Date(Date.now() + 3 * day))),
      /the CA is not valid before /,
    ],
    [
      "a file that holds no certificate",
      async () => ({ cert: join(ROOT, "package.json"), key: writePair(tmp(), await createCertificateAuthority("a", 30)).key }),
      /the CA certificate does not parse/,
    ],
  ];
  for (const [name, make, message] of refused) {
    it(`${name} → exit 2, nothing written`, async () => {
      const { cert, key } = await make();
      const out = join(tmp(), "out");
      const r = await generate(out, "--ca-cert", cert, "--ca-key", key);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, message);
      assert.ok(!existsSync(out), "wrote output for a refused CA");
    });
  }

  const malformed: Array<[string, string[], RegExp]> = [
    ["--ip not-an-ip", ["--ip", "not-an-ip"], /--ip "not-an-ip" is not an IPv4 or IPv6 address/],
    ["--ip 300.1.1.1", ["--ip", "300.1.1.1"], /--ip "300.1.1.1" is not an IPv4 or IPv6 address/],
    ["--dns with an underscore", ["--dns", "bad_name.example"], /--dns "bad_name.example" is not a DNS name/],
    ["--dns upper case", ["--dns", "Example.COM"], /is not a DNS name/],
    ["--days 0", ["--days", "0"], /--days must be an integer from 1 to 3650/],
    ["--ca-cert without --ca-key", ["--ca-cert", "x"], /--ca-cert and --ca-key go together/],
    ["--key-type dsa", ["--key-type", "dsa"], /--key-type must be ecdsa or rsa, got "dsa"/],
  ];
  for (const [name, extra, message] of malformed) {
    it(`${name} → exit 2 with the usage`, async () => {
      const r = await generate(join(tmp(), "out"), ...extra);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, message);
      assert.match(r.stderr, /Usage: quartermaster/);
    });
  }
  it("--service that is not a DNS label → exit 2", async () => {
    const r = await run(["certs", "generate", "--service", "Web_hook", "--namespace", "qm", "--out", join(tmp(), "out")]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /--service must be a DNS-1123 label, got "Web_hook"/);
  });

  const openssl = (() => {
    try {
      execFileSync("openssl", ["version"], { stdio: "ignore" });
      return true;
    } catch {
      return false;
    }
  })();
  // Every pairing of the given CA's key and --key-type (absent: ECDSA P-256).
  const pairings: Array<{ ca: KeyType; flag?: KeyType; leaf: string }> = [
    { ca: "ecdsa", leaf: "id-ecPublicKey" },
    { ca: "rsa", leaf: "id-ecPublicKey" },
    { ca: "ecdsa", flag: "rsa", leaf: "rsaEncryption" },
    { ca: "rsa", flag: "rsa", leaf: "rsaEncryption" },
    { ca: "rsa", flag: "ecdsa", leaf: "id-ecPublicKey" },
  ];
  for (const p of pairings) {
    it(
      `a valid ${p.ca} CA${p.flag ? ` with --key-type ${p.flag}` : ""} signs a chain \`openssl verify\` accepts; the leaf never outlives the CA`,
      { skip: openssl ? false : "no openssl on PATH" },
      async () => {
        const ca = writePair(tmp(), await createCertificateAuthority("given", 10, new Date(), p.ca));
        const out = join(tmp(), "out");
        const r = await generate(
          out,
          "--ca-cert",
          ca.cert,
          "--ca-key",
          ca.key,
          "--days",
          "365",
          "--ip",
          "::1",
          "--dns",
          "*.qm.example",
          ...(p.flag ? ["--key-type", p.flag] : []),
        );
        assert.equal(r.code, 0, r.stderr);
        assert.equal(readFileSync(join(out, "ca.crt"), "utf8"), readFileSync(ca.cert, "utf8"));
        const verified = execFileSync("openssl", ["verify", "-purpose", "sslserver", "-CAfile", join(out, "ca.crt"), join(out, "tls.crt")], {
          encoding: "utf8",
        });
        assert.match(verified, /tls\.crt: OK/);
        const text = execFileSync("openssl", ["x509", "-noout", "-text", "-in", join(out, "tls.crt")], { encoding: "utf8" });
        assert.match(text, new RegExp(`Public Key Algorithm: ${p.leaf}`));
        // openssl reads the key and finds it belongs to the certificate.
        const pub = (args: string[]): string => execFileSync("openssl", args, { encoding: "utf8" });
        assert.equal(pub(["pkey", "-pubout", "-in", join(out, "tls.key")]), pub(["x509", "-noout", "-pubkey", "-in", join(out, "tls.crt")]));
        const leaf = new X509Certificate(readFileSync(join(out, "tls.crt")));
        const caCert = new X509Certificate(readFileSync(ca.cert));
        assert.ok(new Date(leaf.validTo) <= new Date(caCert.validTo), `${leaf.validTo} after ${caCert.validTo}`);
      },
    );
  }
  it("a CA openssl made (P-384, its own name encoding) signs a chain `openssl verify` accepts", { skip: openssl ? false : "no openssl on PATH" }, async () => {
    const dir = tmp();
    const ca = { cert: join(dir, "ca.crt"), key: join(dir, "ca.key") };
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-384",
        "-nodes",
        "-keyout",
        ca.key,
        "-out",
        ca.cert,
        "-days",
        "10",
        "-subj",
        "/O=Example Org/CN=external-ca",
      ],
      { stdio: "ignore" },
    );
    const out = join(tmp(), "out");
    const r = await generate(out, "--ca-cert", ca.cert, "--ca-key", ca.key, "--days", "5");
    assert.equal(r.code, 0, r.stderr);
    assert.match(execFileSync("openssl", ["verify", "-purpose", "sslserver", "-CAfile", ca.cert, join(out, "tls.crt")], { encoding: "utf8" }), /tls\.crt: OK/);
    assert.match(
      execFileSync("openssl", ["x509", "-noout", "-text", "-in", join(out, "tls.crt")], { encoding: "utf8" }),
      /Signature Algorithm: ecdsa-with-SHA384/,
    );
  });
  for (const keyType of [undefined, "rsa", "ecdsa"] as const) {
    it(
      `certs generate${keyType ? ` --key-type ${keyType}` : ""}: a new CA and leaf of ${keyType ?? "ecdsa"} keys that \`openssl verify\` accepts`,
      { skip: openssl ? false : "no openssl on PATH" },
      async () => {
        const out = join(tmp(), "out");
        const r = await generate(out, ...(keyType ? ["--key-type", keyType] : []));
        assert.equal(r.code, 0, r.stderr);
        assert.match(
          execFileSync("openssl", ["verify", "-purpose", "sslserver", "-CAfile", join(out, "ca.crt"), join(out, "tls.crt")], { encoding: "utf8" }),
          /tls\.crt: OK/,
        );
        const want = keyType === "rsa" ? "rsaEncryption" : "id-ecPublicKey";
        for (const f of ["ca.crt", "tls.crt"])
          assert.match(
            execFileSync("openssl", ["x509", "-noout", "-text", "-in", join(out, f)], { encoding: "utf8" }),
            new RegExp(`Public Key Algorithm: ${want}`),
          );
      },
    );
  }
  it("a valid CA signs a chain `openssl verify` accepts; the leaf never outlives the CA", { skip: openssl ? false : "no openssl on PATH" }, async () => {
    const ca = writePair(tmp(), await createCertificateAuthority("given", 10));
    const out = join(tmp(), "out");
    const r = await generate(out, "--ca-cert", ca.cert, "--ca-key", ca.key, "--days", "365", "--ip", "::1", "--dns", "*.qm.example");
    assert.equal(r.code, 0, r.stderr);
    assert.equal(readFileSync(join(out, "ca.crt"), "utf8"), readFileSync(ca.cert, "utf8"));
    const verified = execFileSync("openssl", ["verify", "-purpose", "sslserver", "-CAfile", join(out, "ca.crt"), join(out, "tls.crt")], { encoding: "utf8" });
    assert.match(verified, /tls\.crt: OK/);
    const leaf = new X509Certificate(readFileSync(join(out, "tls.crt")));
    const caCert = new X509Certificate(readFileSync(ca.cert));
    assert.ok(new Date(leaf.validTo) <= new Date(caCert.validTo), `${leaf.validTo} after ${caCert.validTo}`);
    assert.match(leaf.subjectAltName ?? "", /DNS:\*\.qm\.example, IP Address:0:0:0:0:0:0:0:1/);
  });
});
