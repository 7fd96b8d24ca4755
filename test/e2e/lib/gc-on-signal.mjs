// Preloaded into a child Node process run with --expose-gc (`node --expose-gc --import <this> ...`) by the memory
// tests: SIGUSR2 collects all garbage at once, so the RSS read next is of what the process holds, not of garbage
// an idle process has had no reason to collect yet. The CLI runs as it ships otherwise.
process.on("SIGUSR2", () => {
  if (typeof globalThis.gc === "function") {
    globalThis.gc();
    globalThis.gc();
  }
});
