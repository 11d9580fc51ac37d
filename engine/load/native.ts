// Which native build of node-llama-cpp the engine runs. Two exist on a machine that built the fast engine:
// - "prebuilt": the binaries node-llama-cpp ships (no compiler needed; what `npm install` gives);
// - "patched": node-llama-cpp's own source build of its addon with engine/native/'s patches, made by
//   scripts/build-engine.sh. They add a unified KV cache option, sequence copies queued into the next decode, and
//   CPU flash attention that skips what a unified cache's mask hides (docs/node-llama-cpp-patch.md); it is compiled
//   with OpenMP for this CPU.
// node-llama-cpp names a local build's folder after its custom cmake options, so the patches' hash, passed as one,
// makes getLlama load exactly the build of these patches, and the prebuilt binaries when there is none.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Llama } from "node-llama-cpp";
import { SETTINGS } from "../../config/settings.js";

export type EngineBuild = "prebuilt" | "patched";
/** What to load: the patched build where it exists (auto), only the prebuilt, or only the patched. */
export type EngineBuildChoice = "auto" | EngineBuild;

export const PATCH_FILE = fileURLToPath(new URL("../native/node-llama-cpp-3.22.1.patch", import.meta.url));
/**
 * The patches to the llama.cpp node-llama-cpp ships, built with the other: CPU flash attention over sparse masks, a
 * unified cache that keeps each sequence's cells together in 64-cell blocks, FP32 vector paths for FP16 data on
 * CPUs with AVX512-FP16 (where the native build otherwise leaves short vectors to scalar code), scalar FP16
 * conversions in one instruction on x86 (not a table and a bit-by-bit rounding), an AMX tile config the compiler
 * keeps (without it a native build on a CPU with AMX dies of SIGILL at its first decode), and large CPU buffers (the
 * KV cache) on transparent huge pages on Linux (a context made again takes tens of milliseconds, not most of a second).
 */
export const LLAMA_PATCH_FILES = [
  "llama.cpp-flash-attn-sparse.patch",
  "llama.cpp-kv-blocks.patch",
  "llama.cpp-avx512fp16.patch",
  "llama.cpp-f16c-scalar.patch",
  "llama.cpp-amx-tile-config.patch",
  "llama.cpp-huge-pages.patch",
].map((f) => fileURLToPath(new URL(`../native/${f}`, import.meta.url)));
/** The cmake option scripts/build-engine.sh sets to the same key. */
export const PATCH_CMAKE_OPTION = "OBI_ENGINE_PATCH";

let key: string | null | undefined;
/** The patches' key (the first 16 hex digits of the SHA-256 of all of them, in turn), or null when one is missing. */
export function patchKey(): string | null {
  if (key === undefined) {
    try {
      const hash = createHash("sha256").update(readFileSync(PATCH_FILE));
      for (const file of LLAMA_PATCH_FILES) hash.update(readFileSync(file));
      key = hash.digest("hex").slice(0, 16);
    } catch {
      key = null;
    }
  }
  return key;
}

/**
 * The build an engine loads when its options name none: ENGINE_BUILD, read through its one declaration
 * (config/settings.ts), so a test run or a bench can pin either build for every engine it opens.
 */
export function defaultBuildChoice(env: NodeJS.ProcessEnv = process.env): EngineBuildChoice {
  const parsed = SETTINGS.engine.build.schema.safeParse(env.ENGINE_BUILD ?? SETTINGS.engine.build.default);
  if (!parsed.success) throw new Error(`ENGINE_BUILD=${env.ENGINE_BUILD}: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}

/** The getLlama options that select a build: the patch's cmake option, unless only the prebuilt is wanted. */
export function buildSelection(choice: EngineBuildChoice): { cmakeOptions?: Record<string, string> } {
  const k = patchKey();
  return choice === "prebuilt" || k === null ? {} : { cmakeOptions: { [PATCH_CMAKE_OPTION]: k } };
}

interface AddonContextClass {
  prototype: { queueSequenceCopy?: unknown; getKvUnified?: unknown };
}

/** Whether the loaded binding carries the patch: a local build whose AddonContext has its methods. */
export function loadedBuild(llama: Llama): EngineBuild {
  const proto = (llama as unknown as { _bindings?: { AddonContext?: AddonContextClass } })._bindings?.AddonContext?.prototype;
  const patched = llama.buildType === "localBuild" && typeof proto?.queueSequenceCopy === "function";
  return patched ? "patched" : "prebuilt";
}

/** The line the engine logs and the error it raises when the patched build was required and is absent. */
export function missingPatchedBuild(): string {
  return patchKey() === null
    ? `ENGINE_BUILD=patched, but one of ${[PATCH_FILE, ...LLAMA_PATCH_FILES].join(", ")} is missing`
    : "ENGINE_BUILD=patched, but the fast engine is not built here: run `npm run build:engine` (needs cmake and g++)";
}
