// Preloaded into a child Node process (`node --import <this> ...`) by the benchmarks: when the process exits, its
// own resource usage (peak RSS, user and system CPU) is written as JSON to the file named by $QM_RUSAGE_FILE,
// so a CLI run as it ships (bin/quartermaster.js) is measured without changing it.
import { writeFileSync } from "node:fs";

const file = process.env.QM_RUSAGE_FILE;
if (file) {
  process.on("exit", () => {
    const u = process.resourceUsage();
    writeFileSync(file, JSON.stringify({ maxRssKiB: u.maxRSS, userCpuMs: u.userCPUTime / 1000, systemCpuMs: u.systemCPUTime / 1000 }));
  });
}
