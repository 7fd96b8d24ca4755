/**
 * @module
 * The device ledger's ConfigMap names and data keys, apart from its layout (./shards.ts), so a reader that only
 * names them (the webhook's capacity reader, src/run/capacity.ts) loads none of the ledger's code to start.
 */
export const LEDGER_INDEX_NAME = "quartermaster-ledger";
export const shardName = (i: number): string => `${LEDGER_INDEX_NAME}-${i}`;
/** Keys of the ConfigMaps' `data`. */
export const INDEX_KEY = "index.json";
export const SHARD_KEY = "shard.json";
export const CHECKSUM_KEY = "sha256";
