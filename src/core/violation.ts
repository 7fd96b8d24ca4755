/**
 * @module
 * What every rule returns for a refusal: the rule, the field path and the message (`details.causes[]` of a denial,
 * a PolicyReport result, an audit line). Below the decisions that make them (src/validate) and the code that sends
 * them (src/admission/response.ts).
 */
/** A field-level reason for a denial, as `details.causes[]` carries it. */
export interface Violation {
  /** The rule that found it (a policy rule name); used for metrics and logs, not sent to the client. */
  rule: string;
  /** Field path in the object, e.g. `spec.containers[0].resources.limits[nvidia.com/gpu]`. */
  field: string;
  message: string;
  /** The value the rule compared, where it compares a count (GPUs, replicas): logged with audited violations, not sent. */
  value?: number;
}
