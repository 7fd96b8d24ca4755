/**
 * @module
 * Objects as the YAML stream a committed manifest holds: one document each, `header` as the first one's
 * leading comment, short lists of scalars on one line (`verbs: [update, delete]`), no line folding.
 */
import type { Document } from "yaml";

export interface YamlStreamOptions {
  /** Lists of scalars longer than this stay one item a line (a long resourceNames list reads better so). */
  maxFlowItems?: number;
  /** Multi-line strings as literal blocks (CEL expressions keep their lines). */
  literalBlocks?: boolean;
  /** Repeated objects written out each time rather than as YAML anchors and aliases. */
  noAliases?: boolean;
  /** Last touches on each document (comments on its items, say), after the lists are laid out. */
  decorate?: (doc: Document) => void | Promise<void>;
}

export async function yamlStream(objects: readonly object[], header: string, opts: YamlStreamOptions = {}): Promise<string> {
  const { Document, isScalar, visit } = await import("yaml");
  const maxFlow = opts.maxFlowItems ?? Infinity;
  const texts: string[] = [];
  for (const [i, o] of objects.entries()) {
    const doc = new Document(o, opts.noAliases ? { aliasDuplicateObjects: false } : {});
    if (i === 0) doc.commentBefore = header;
    visit(doc, { Seq: (_key, seq) => void (seq.flow = seq.items.every((item) => isScalar(item)) && seq.items.length <= maxFlow) });
    await opts.decorate?.(doc);
    texts.push(doc.toString({ lineWidth: 0, flowCollectionPadding: false, ...(opts.literalBlocks ? { blockQuote: "literal" as const } : {}) }));
  }
  return texts.join("---\n");
}
