/**
 * @module
 * The policy a command runs with, one helper for every command: `--policy F` read and checked (every problem
 * listed), or the built-in policy without it; the `--namespace` every render takes; and Quartermaster's own
 * namespace where a command runs in the cluster.
 */
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { InvalidArgumentError, Option } from "commander";
import { errorMessage, PolicyError } from "../core/errors.js";
import { isNamespaceName } from "../core/names.js";
import { defaultPolicy } from "../policy/default.js";
import type { Policy } from "../policy/types.js";
import type { CliIo } from "./io.js";

/** Reads and checks a policy file, or returns the defaults when `file` is undefined. */
export async function loadPolicy(file: string | undefined, cwd: string): Promise<Policy> {
  if (file === undefined) return defaultPolicy();
  let text: string;
  try {
    text = await readFile(resolve(cwd, file), "utf8");
  } catch (err) {
    throw new PolicyError(file, [`cannot read: ${errorMessage(err)}`]);
  }
  const { parsePolicy } = await import("../policy/parse.js");
  return parsePolicy(text, file);
}

/** The policy at `file` (the built-in one without), or undefined once its problems are written to stderr. */
export async function loadPolicyOrReport(file: string | undefined, io: CliIo): Promise<Policy | undefined> {
  try {
    return await loadPolicy(file, io.cwd);
  } catch (err) {
    if (!(err instanceof PolicyError)) throw err;
    io.stderr(err.message);
    return undefined;
  }
}

/** The parser of a render's `--namespace`: a namespace name (DNS-1123 label), else a usage error. */
export function namespaceName(value: string): string {
  if (!isNamespaceName(value)) throw new InvalidArgumentError(`--namespace must be a namespace name (DNS-1123 label), got ${JSON.stringify(value)}`);
  return value;
}

/** `--namespace <name>` of a render: Quartermaster's namespace, `quartermaster` unless given. */
export function renderNamespaceOption(description: string): Option {
  return new Option("--namespace <name>", description).argParser(namespaceName).default("quartermaster", "quartermaster");
}

const SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/** Quartermaster's namespace: the flag, else the pod's own (in cluster), else `quartermaster`. */
export async function ownNamespace(flag?: string): Promise<string> {
  return (
    flag ??
    (await readFile(SA_NAMESPACE_FILE, "utf8").then(
      (s) => s.trim(),
      () => "quartermaster",
    ))
  );
}
