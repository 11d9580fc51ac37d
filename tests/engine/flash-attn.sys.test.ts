// The patched build's CPU flash attention (engine/native/llama.cpp-flash-attn-sparse.patch) against ggml's own
// reference kernel, through a small C++ program linked to that build's libraries (flash-attn-check.cpp): masks of
// many sequences in one unified KV cache, each seeing a shared prefix and its own scattered cells, and one causal
// sequence. Skipped with a note where the patched build or g++ is missing.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { repoRoot } from "../../testkit/repo-root.js";

const llamaDir = path.resolve(import.meta.dirname, "../../node_modules/node-llama-cpp/llama");

/** The patched build's library folder, as scripts/build-engine.sh names it; null where it is not built. */
function patchedLibraries(): string | null {
  const script = spawnSync("bash", [path.join(repoRoot, "scripts/build-engine.sh"), "--cached"], { encoding: "utf8" });
  return script.status === 0 ? path.join(repoRoot, script.stdout.trim(), "Release") : null;
}

const hasGxx = () => spawnSync("g++", ["--version"], { stdio: "ignore" }).status === 0;

const libraries = patchedLibraries();
const include = path.join(llamaDir, "llama.cpp/ggml/include");
const ready = libraries !== null && existsSync(include) && hasGxx();
if (!ready)
  console.warn(
    "the patched engine or g++ is missing here (npm run build:engine needs cmake and g++): the flash-attention check is skipped",
  );

const work = mkdtempSync(path.join(tmpdir(), "obi-fa-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe.skipIf(!ready)("CPU flash attention on the patched build", () => {
  it("matches ggml's reference kernel on unified-cache masks and on one causal sequence", () => {
    const binary = path.join(work, "flash-attn-check");
    const source = path.join(import.meta.dirname, "flash-attn-check.cpp");
    const lib = libraries as string;
    const args = ["-O2", "-std=c++17", source, `-I${include}`, `-L${lib}`, "-lggml-base", "-lggml-cpu", `-Wl,-rpath,${lib}`];
    const compiled = spawnSync("g++", [...args, "-o", binary], { encoding: "utf8" });
    expect(compiled.status, compiled.stderr).toBe(0);
    const run = spawnSync(binary, { encoding: "utf8" });
    expect(run.status, run.stdout + run.stderr).toBe(0);
    const lines = run.stdout.trim().split("\n");
    expect(lines).toHaveLength(9);
    for (const line of lines) expect(line).toMatch(/^ok /);
  }, 120_000);
});
