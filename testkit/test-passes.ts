// Which test files CI runs again after `npm test`: those whose model changes when ../shared is hidden and where
// the model is what is tested, and the engine's tests whose build is the default one, found from the files'
// imports rather than kept by hand.
import { readFileSync } from "node:fs";
import path from "node:path";
import { importEdges } from "./floors.js";
import { repoFiles, repoRoot } from "./repo-root.js";

/** testkit/model.ts's functions that pick ../shared's model (the others open the generated model or list builds). */
export const SHARED_PICKS = /\b(sharedModel|testModelPath|testModelName|openTestEngine)\b/;
/** A path into ../shared written in code: a quoted string or a URL, not a mention in a comment. */
const SHARED_PATH = /["'`][^"'`\n]*\.\.\/shared\/[^"'`\n]*["'`]/;
/** A file that runs its engines on builds it names: each build there is, or both by name. */
export const NAMES_ITS_BUILDS = /\bengineBuilds\(\)|\.each\(\s*\[\s*"prebuilt",\s*"patched"\s*\]/;

const TEST_FILE = /\.(unit|int|sys)\.test\.ts$/;
const text = (file: string) => readFileSync(path.join(repoRoot, file), "utf8");
const tierOf = (file: string) => TEST_FILE.exec(file)?.[1];

/** Whether a file itself reaches ../shared: through testkit/model.ts's pickers, or by a path of its own. */
export function readsSharedItself(file: string, source = text(file)): boolean {
  if (file === "testkit/model.ts") return true;
  const importsPicker = /testkit\/model\.js["']/.test(source) && SHARED_PICKS.test(source);
  return importsPicker || SHARED_PATH.test(source);
}

/** The test files that reach ../shared, directly or through the helpers and modules they import. */
export function sharedModelFiles(): string[] {
  const imports = new Map<string, string[]>();
  for (const { from, to } of importEdges()) {
    const list = imports.get(from) ?? [];
    list.push(to.replace(/\.js$/, ".ts"));
    imports.set(from, list);
  }
  const memo = new Map<string, boolean>();
  const reaches = (file: string): boolean => {
    const known = memo.get(file);
    if (known !== undefined) return known;
    memo.set(file, false); // an import cycle adds nothing
    // testkit/model.ts is reached by name: importing only openGeneratedEngine or engineBuilds changes nothing.
    const own = file !== "testkit/model.ts" && readsSharedItself(file);
    const result = own || (imports.get(file) ?? []).some((to) => to !== "testkit/model.ts" && reaches(to));
    memo.set(file, result);
    return result;
  };
  return testFiles().filter(reaches);
}

/**
 * The pass without ../shared: of the files whose model changes, those where the model is what is tested. The
 * integration tier runs the engine in process on it; a file that reads ../shared itself picks models by name or
 * skips without them. A system file that reaches ../shared only through a helper starting the service runs the
 * service over whatever model it is given (its HTTP, its stores, its processes): `npm test` ran it, and the
 * generated model changes none of what it checks, so the pass leaves it out (three quarters of the pass's time).
 */
export function noSharedFiles(): string[] {
  return sharedModelFiles().filter((f) => tierOf(f) === "int" || readsSharedItself(f));
}

/** The engine's tests that load the default build (ENGINE_BUILD): those that name their builds ran each already. */
export function defaultBuildFiles(): string[] {
  return testFiles().filter((f) => f.startsWith("tests/engine/") && tierOf(f) !== "unit" && !NAMES_ITS_BUILDS.test(text(f)));
}

export function testFiles(): string[] {
  return repoFiles("tests", (name) => TEST_FILE.test(name));
}
