/**
 * What the `serve` bundle (./bundle.ts) has in place of @opentelemetry/api. prom-client requires the API when it is
 * loaded (lib/metrics/processCpuTotal.js), for exemplars only, which Quartermaster never turns on; evaluating the
 * API's ~50 KB was a tenth of the bundled start. Should a metric ever ask for a span, it is told why there is none.
 */
const absent = (): never => {
  throw new Error("exemplars are off in Quartermaster: the serve bundle leaves @opentelemetry/api out (release/no-otel.ts)");
};

export const trace = { getSpan: absent };
export const context = { active: absent };
