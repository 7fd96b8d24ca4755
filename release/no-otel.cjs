"use strict";
/**
 * What the `serve` bundle (./bundle.ts) has in place of @opentelemetry/api. prom-client requires the API when it is
 * loaded (lib/metrics/processCpuTotal.js), for exemplars only, which Quartermaster never turns on; evaluating the
 * API's ~50 KB was a tenth of the bundled start. Should a metric ever ask for a span, it is told why there is none.
 */
const absent = () => {
  throw new Error("exemplars are off in Quartermaster: the serve bundle leaves @opentelemetry/api out (release/no-otel.cjs)");
};
module.exports = { trace: { getSpan: absent }, context: { active: absent } };
