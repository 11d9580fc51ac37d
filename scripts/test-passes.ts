// Prints the test files one of CI's later passes runs, one a line: `no-shared` (those whose model changes when
// ../shared is hidden and is what they test) or `prebuilt` (the engine's tests on the default build), chosen by
// testkit/test-passes.ts.
import { defaultBuildFiles, noSharedFiles } from "../testkit/test-passes.js";

const passes: Record<string, () => string[]> = { "no-shared": noSharedFiles, prebuilt: defaultBuildFiles };
const pass = passes[process.argv[2] ?? ""];
if (!pass) {
  console.error(`usage: tsx scripts/test-passes.ts ${Object.keys(passes).join("|")}`);
  process.exit(2);
}
console.log(pass().join("\n"));
