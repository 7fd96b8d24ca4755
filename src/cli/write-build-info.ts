/**
 * @module
 * Run by `npm run build` after tsc (as dist/src/cli/write-build-info.js): writes dist/build-info.json, the commit and
 * build date `quartermaster version` prints (src/cli/build-info.ts). `QM_BUILD_COMMIT` names the commit where
 * there is no .git (a container build); `SOURCE_DATE_EPOCH` fixes the date, so a rebuild is byte-identical.
 */
import { fileURLToPath } from "node:url";
import { BUILD_INFO_FILE, writeBuildInfo } from "./build-info.js";

const info = await writeBuildInfo({
  file: fileURLToPath(new URL(`../../${BUILD_INFO_FILE}`, import.meta.url)),
  root: fileURLToPath(new URL("../../..", import.meta.url)),
  env: process.env,
  now: () => new Date(),
});
process.stdout.write(`${BUILD_INFO_FILE}: commit ${info.commit}, built ${info.buildDate}\n`);
