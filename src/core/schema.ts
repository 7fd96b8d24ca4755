/**
 * @module
 * Reporting schema errors. The validators themselves are generated at build time by ajv's standalone
 * code generation (`src/generated/`), so no schema is compiled when a process starts.
 */
import type { ErrorObject } from "ajv";

/**
 * Turns ajv errors into one line each, with a dotted field path:
 * `request.kind.group: must have required property 'group'`.
 */
export function describeSchemaErrors(errors: readonly ErrorObject[] | null | undefined, root = ""): string[] {
  const lines = (errors ?? []).map((e) => {
    let path = pointerToPath(e.instancePath, root);
    if (e.keyword === "required") {
      const missing = String((e.params as { missingProperty?: unknown }).missingProperty);
      return `${path || root || "(document)"}: missing required field '${missing}'`;
    }
    if (e.keyword === "additionalProperties") {
      const extra = String((e.params as { additionalProperty?: unknown }).additionalProperty);
      return `${path || root || "(document)"}: unknown field '${extra}'`;
    }
    let message = e.message ?? "is invalid";
    if (e.keyword === "enum") {
      const allowed = (e.params as { allowedValues?: unknown[] }).allowedValues ?? [];
      message = `must be one of ${allowed.map((v) => JSON.stringify(v)).join(", ")}`;
    } else if (e.keyword === "const") {
      message = `must be ${JSON.stringify((e.params as { allowedValue?: unknown }).allowedValue)}`;
    }
    if (!path) path = root || "(document)";
    return `${path}: ${message}`;
  });
  return [...new Set(lines)];
}

/** `/spec/containers/0/name` → `spec.containers[0].name` (with an optional root prefix). */
export function pointerToPath(pointer: string, root = ""): string {
  let out = root;
  for (const raw of pointer.split("/").slice(1)) {
    const seg = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (/^\d+$/.test(seg)) out += `[${seg}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(seg)) out += out ? `.${seg}` : seg;
    else out += `[${seg}]`;
  }
  return out;
}
