/**
 * @module
 * The type boundary: where a value is given a type the compiler cannot check because two types describe the
 * same runtime value from two sides that do not know each other. These conversions live here, each with the
 * reason it is sound, and this is the one module of src/ allowed `as unknown as` (test/unit/project/no-any.test.ts;
 * src/cli/ is exempt there until its rewrite lands). Plain single `as` casts elsewhere are not collected here.
 *
 * - Kubernetes objects: client-node's `V1*` classes and our `KubeObject` (`Record<string, unknown>`,
 *   src/core/kube.ts) both describe the apiserver's JSON. client-node deserialises to it (every field
 *   optional; timestamps typed `Date` are sometimes still strings, so readers such as src/kube/cluster.ts
 *   normalise them), and the apiserver accepts it back.
 * - Node's HTTP listeners: with `allowHTTP1`, node:http2's compatibility API calls one request listener
 *   for both protocols; ours is typed for node:http's request and response, which the compatibility
 *   objects mirror.
 * - ajv's standalone validators (src/generated/*-validator.ts, `// @ts-nocheck`): generated from the JSON
 *   Schema that the named TypeScript type describes, so a `true` answer narrows the data to that type.
 */
import type { V1Lease, V1Namespace, V1Node, V1Pod, V1PodSpec, V1Service, V1Taint } from "@kubernetes/client-node";
import type { ValidateFunction } from "ajv";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { KubeObject } from "./kube.js";

/**
 * A typed client-node object (or any apiserver object) as our untyped `KubeObject`. Sound: an object's own
 * enumerable fields are string-keyed JSON values; `KubeObject` claims no more than that.
 */
export function asKubeObject(x: object): KubeObject {
  return x as unknown as KubeObject;
}

/** An apiserver Pod (client-node's, or raw JSON) read through client-node's `V1Pod`: both describe the same JSON. */
export function asV1Pod(o: object): V1Pod {
  return o;
}

/**
 * A pod spec read from an untyped object (a pod's, a template's) through client-node's `V1PodSpec`, as
 * `asV1Pod`: the readers of a spec (src/core/gpu.ts) check each field they use, `containers` included.
 */
export function asV1PodSpec(o: object): V1PodSpec {
  return o as V1PodSpec;
}

/** A node's taint from an untyped Node (each field checked where it is compared: src/explain/nodes.ts). */
export function asV1Taint(o: object): V1Taint {
  return o as V1Taint;
}

/** An apiserver Service read through client-node's `V1Service` (as `asV1Pod`). */
export function asV1Service(o: object): V1Service {
  return o;
}

/** An apiserver Node read through client-node's `V1Node` (as `asV1Pod`). */
export function asV1Node(o: object): V1Node {
  return o;
}

/** An apiserver Namespace read through client-node's `V1Namespace` (as `asV1Pod`). */
export function asV1Namespace(o: object): V1Namespace {
  return o;
}

/** An apiserver Lease read through client-node's `V1Lease` (as `asV1Pod`). */
export function asV1Lease(o: object): V1Lease {
  return o;
}

/**
 * A generated ajv standalone validator (its module is `@ts-nocheck`, so the compiler sees only an untyped
 * function) as the `ValidateFunction` of the type its schema describes. Sound as long as the schema and the
 * type agree: the validators are generated from the same schema modules (`npm run generate`).
 */
export function compiledValidator<T>(generated: unknown): ValidateFunction<T> {
  return generated as ValidateFunction<T>;
}

/**
 * A node:http request listener as the listener of an `allowHTTP1` node:http2 server. node:http2's
 * Compatibility API exists for this: its request and response mirror node:http's, so one listener serves
 * HTTP/1.1 and HTTP/2 (src/server/serve.ts has always passed the same listener to both kinds of server).
 */
export function asHttp2CompatListener(
  listener: (req: IncomingMessage, res: ServerResponse) => void,
): (req: Http2ServerRequest, res: Http2ServerResponse) => void {
  return listener as unknown as (req: Http2ServerRequest, res: Http2ServerResponse) => void;
}
