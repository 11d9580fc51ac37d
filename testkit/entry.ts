// How tests start the product's entry points as processes (app/main.ts, runner/main.ts, scripts/keys.ts): as the
// JavaScript compiled once at the start of a run (vitest's global setup for the system tier, `buildForTests`), the
// way the production image runs it (`npm run start:prod`), else through tsx, the way `npm start` runs it. A run starts
// hundreds of processes, and each one through tsx spent a second or more of a core compiling and resolving through
// its loader. OBI_TEST_TSX=1 starts every process through tsx.
import { execFile } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { repoRoot } from "./repo-root.js";

/** Inside the repository, so the compiled code finds its dependencies in node_modules as the sources do. */
export const TEST_BUILD_DIR = path.join(repoRoot, "node_modules/.cache/obi-test-build");
/** Set by the global setup once the build is whole; a process started without it (`npm run chaos`) uses tsx. */
const BUILT = "OBI_TEST_BUILD";

/**
 * V8's optimization budget of the test run's workers (vitest.config.ts says why), passed on to the processes they
 * start; a process not started by a test (the bench's) runs with V8's defaults, as users run it.
 */
const inheritedV8Flags = () => process.execArgv.filter((a) => a.startsWith("--interrupt-budget="));

/** node's arguments that run `script` (a path from the repository's root, `.ts`), with `nodeArgs` before it. */
export function entryArgs(script: string, nodeArgs: string[] = []): string[] {
  nodeArgs = [...inheritedV8Flags(), ...nodeArgs];
  const js = path.join(TEST_BUILD_DIR, script.replace(/\.ts$/, ".js"));
  if (process.env[BUILT] === TEST_BUILD_DIR && !process.env.OBI_TEST_TSX && existsSync(js)) return [...nodeArgs, js];
  return [...nodeArgs, "--import", "tsx", path.join(repoRoot, script)];
}

/**
 * The product as `npm run build` makes it, into TEST_BUILD_DIR: tsconfig.build.json's files compiled one by one, the
 * assets the build reads beside itself, and the entry points bundled over them (scripts/bundle-entries.mjs); on every
 * run, so a process never runs stale code. esbuild strips the types file by file, which `isolatedModules` makes the
 * same as tsc's output; tsc took about 8 s of a core for it, without type checking, and the tier's first files waited
 * on it (`npm run lint` checks types, and tests/e2e/build.sys.test.ts compiles with tsc itself).
 */
export async function buildForTests(): Promise<void> {
  if (process.env.OBI_TEST_TSX) return;
  rmSync(TEST_BUILD_DIR, { recursive: true, force: true });
  // Imported here, not above: the files that only start processes would load the compiler for nothing.
  const [{ build }, { default: ts }] = await Promise.all([import("esbuild"), import("typescript")]);
  const tsconfig = path.join(repoRoot, "tsconfig.build.json");
  const { config } = ts.readConfigFile(tsconfig, ts.sys.readFile);
  const { fileNames } = ts.parseJsonConfigFileContent(config, ts.sys, repoRoot, undefined, tsconfig);
  await build({
    entryPoints: fileNames.filter((f) => !f.endsWith(".d.ts")),
    outdir: TEST_BUILD_DIR,
    outbase: repoRoot,
    format: "esm",
    platform: "node",
    target: "node20",
    tsconfig,
    logLevel: "error",
  });
  const node = (script: string) => promisify(execFile)(process.execPath, [script, TEST_BUILD_DIR], { cwd: repoRoot });
  await node("scripts/copy-build-assets.mjs");
  await node("scripts/bundle-entries.mjs");
  process.env[BUILT] = TEST_BUILD_DIR;
}

/** The build, made unless this process already has one whole (a test run's, which other files are using). */
export async function ensureBuilt(): Promise<void> {
  if (process.env[BUILT] === TEST_BUILD_DIR && existsSync(TEST_BUILD_DIR)) return;
  await buildForTests();
}

/** The same as a shell's words (for a test that runs it under `sh -c`: a mount first, a lowered limit). */
export function entryShell(script: string, nodeArgs: string[] = []): string {
  return [process.execPath, ...entryArgs(script, nodeArgs)].map((a) => `"${a}"`).join(" ");
}
