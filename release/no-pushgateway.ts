/**
 * What the `serve` bundle (./bundle.ts) has in place of prom-client's lib/pushgateway.js. prom-client's index requires
 * it when it is loaded, and it requires `node:zlib`, `node:http` and `node:https` at once (~2.5 ms of a cold start, zlib
 * most); Quartermaster is scraped, never pushes. Should anything ever construct one, it is told why there is none.
 */
export default class Pushgateway {
  constructor() {
    throw new Error("a Pushgateway is not in Quartermaster's serve bundle: metrics are scraped (release/no-pushgateway.ts)");
  }
}
