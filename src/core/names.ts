/**
 * @module
 * Kubernetes' name formats (k8s.io/apimachinery/pkg/util/validation), one definition each: namespaces and
 * most object names are DNS-1123 labels, Services DNS-1035 labels, host names DNS-1123 subdomains.
 */

/** A DNS-1123 label: lowercase alphanumerics and `-`, starting and ending alphanumeric, at most 63 characters. */
export const DNS_1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** A DNS-1035 label (Service names): a DNS-1123 label that starts with a letter. */
export const DNS_1035_LABEL = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** A DNS name as a certificate SAN takes it: DNS-1123 labels joined by dots, a leading `*.` allowed. */
export const DNS_SAN = /^(\*\.)?[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$/;

/** True when `name` is a valid namespace name. */
export function isNamespaceName(name: string): boolean {
  return DNS_1123_LABEL.test(name);
}
