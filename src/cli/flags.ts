/**
 * @module
 * Flags as commander parses them: each value is checked by the flag's own parser ({@link integer},
 * {@link oneOf}), which throws commander's `InvalidArgumentError`, so a bad value is a usage error (exit 2,
 * with the usage) before the command runs; a command gets its flags typed (`cmd.opts<T>()`). The flags
 * several commands share are made here, so each reads and parses the same everywhere.
 *
 * Every parser's message names the flag and what it takes (`--port must be an integer from 0 to 65535, got
 * abc`): the program prints it in place of commander's generic "option ... argument ... is invalid." (see
 * `usageLine` in ./program.ts), as these messages read before commander parsed the values.
 *
 * Defaults: a flag whose default depends on others, or whose absence a command checks (`--metrics-port` of
 * `reconcile`, `--tls-cert`), shows its default in the help only ({@link withDefault}) and is undefined when
 * not given; every other default is commander's own (`.default(value, shown)`), so the command sees a value.
 */
import { InvalidArgumentError, Option } from "commander";
import type { LevelWithSilent } from "pino";
import { formatDuration } from "../core/errors.js";
import { LOG_LEVELS } from "../log.js";

/** The largest value an integer flag takes unless told otherwise. */
const MAX = Number.MAX_SAFE_INTEGER;

/** Decimal digits, an optional leading minus: what an integer flag accepts (not `1e3`, `0x10`, ` 12` or the empty string). */
const INTEGER = /^-?\d+$/;

/**
 * The parser of an integer flag (ports, intervals, counts): `value` as a number from `min` to `max`, or
 * commander's `InvalidArgumentError` saying so.
 */
export function integer(flag: string, min = 0, max = MAX): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!INTEGER.test(value) || !Number.isSafeInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`${flag} must be an integer from ${min} to ${max}, got ${value}`);
    return n;
  };
}

/** The parser of a flag that takes one of `choices`; `message` says what else it got. */
export function oneOf<T extends string>(choices: readonly T[], message: (value: string) => string): (value: string) => T {
  return (value) => {
    const found = choices.find((c) => c === value);
    if (found === undefined) throw new InvalidArgumentError(message(value));
    return found;
  };
}

/** The parser of a repeatable flag (`--ip a --ip b`): every value, in order. */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** A description with the default the command applies, shown in the help only: `kubeconfig (default: ...)`. */
export function withDefault(description: string, shown: string): string {
  return `${description} (default: ${shown})`;
}

/** An integer flag, `--port <port>`, from `min` to `max`; `fallback`, when given, is commander's default. */
export function integerOption(flags: string, description: string, range: { min?: number; max?: number; fallback?: number }): Option {
  const option = new Option(flags, description);
  option.argParser(integer(option.long ?? flags, range.min, range.max));
  return range.fallback === undefined ? option : option.default(range.fallback, String(range.fallback));
}

/** `--policy <file>`: undefined when not given (the built-in policy). */
export function policyOption(): Option {
  return new Option("--policy <file>", withDefault("policy file (YAML or JSON)", "the built-in policy"));
}

/** `--kubeconfig <file>`: undefined when not given (the client's own search). */
export function kubeconfigOption(): Option {
  return new Option("--kubeconfig <file>", withDefault("kubeconfig", "$KUBECONFIG, ~/.kube/config, else in-cluster"));
}

/** `--log-level <level>`, one of pino's levels; info by default. */
export function logLevelOption(): Option {
  return new Option("--log-level <level>", `log level: ${LOG_LEVELS.join(", ")}`)
    .argParser(oneOf<LevelWithSilent>(LOG_LEVELS, () => `--log-level must be one of ${LOG_LEVELS.join(", ")}`))
    .default("info", "info");
}

export type TableOrJson = "table" | "json";

/**
 * `-o, --output <format>`, table or json, of `command`. Table by default; with `applied: false` the default
 * is the command's (the flag undefined when not given: `reconcile --watch` refuses it).
 */
export function outputOption(command: string, applied = true): Option {
  const parse = oneOf<TableOrJson>(["table", "json"], () => `${command}: -o must be table or json`);
  return applied
    ? new Option("-o, --output <format>", "table or json").argParser(parse).default("table", "table")
    : new Option("-o, --output <format>", withDefault("table or json", "table")).argParser(parse);
}

/** `--namespace <name>` with help-only default `shown`: undefined when not given. */
export function namespaceOption(description: string, shown: string): Option {
  return new Option("--namespace <name>", withDefault(description, shown));
}

/** The deadline of each request of an interactive command (doctor, ledger, audit, certs, reconcile --once), as --request-timeout's default. */
export const INTERACTIVE_REQUEST_TIMEOUT_MS = 30_000;

const DURATION_UNITS: Readonly<Record<string, number>> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 };

/**
 * The parser of a duration flag as kubectl reads --request-timeout: a Go duration (`30s`, `1m`, `1m30s`,
 * `500ms`) or a bare number of seconds (`0` for none), in ms. Hand-written: Go's `time.ParseDuration`
 * syntax is five lines here and no npm package reads exactly it.
 */
export function duration(flag: string): (value: string) => number {
  return (value) => {
    const bad = (): never => {
      throw new InvalidArgumentError(`${flag} must be a duration such as 30s, 1m or 500ms (0 for none), got ${value}`);
    };
    if (INTEGER.test(value) && !value.startsWith("-")) return Number(value) * 1000;
    if (!/^(\d+(\.\d+)?(h|ms|m|s))+$/.test(value)) return bad();
    let ms = 0;
    for (const m of value.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s)/g)) ms += Number(m[1]) * DURATION_UNITS[m[2]!]!;
    return Number.isSafeInteger(Math.round(ms)) ? Math.round(ms) : bad();
  };
}

/**
 * `--request-timeout <duration>`, kubectl's flag: how long each request to the apiserver may take, its
 * credentials and body included. Undefined when not given: the command applies `shown`.
 */
export function requestTimeoutOption(shown = "30s"): Option {
  return new Option(
    "--request-timeout <duration>",
    withDefault("how long each request to the API server may take (30s, 1m, 500ms; 0 for no limit)", shown),
  ).argParser(duration("--request-timeout"));
}

/**
 * What a command that reads the cluster says on stderr before it waits: what for, and for how long at most,
 * so a slow apiserver is never a silent terminal (`quartermaster: ledger: reading ... (each request up to 30s,
 * --request-timeout)`).
 */
export function waitingLine(command: string, what: string, timeoutMs: number): string {
  const bound = timeoutMs > 0 ? `each request up to ${formatDuration(timeoutMs)}, --request-timeout` : "no time limit, --request-timeout 0";
  return `quartermaster: ${command}: ${what} (${bound})`;
}
