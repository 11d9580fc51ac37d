// Which node-llama-cpp build the engine loads (engine/load/native.ts) and what the build script says where it cannot
// build: one line, and the prebuilt engine stays; and that each build present runs on this CPU.
import { spawnSync } from "node:child_process";
import { existsSync, symlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../config/config.js";
import { buildSelection, defaultBuildChoice, missingPatchedBuild, PATCH_CMAKE_OPTION, patchKey } from "../../engine/load/native.js";
import { entryArgs } from "../../testkit/entry.js";
import { NO_PATCHED_BUILD } from "../../testkit/model.js";
import { repoRoot } from "../../testkit/repo-root.js";
import { tempDir } from "../helpers/scratch.js";

const patchedBuilt = spawnSync("bash", [path.join(repoRoot, "scripts/build-engine.sh"), "--cached"]).status === 0;
if (!patchedBuilt) console.warn(NO_PATCHED_BUILD);

describe("the engine's build choice", () => {
  it("keys the patched build by the patch's hash, and asks for nothing of the kind when only the prebuilt is wanted", () => {
    expect(patchKey()).toMatch(/^[0-9a-f]{16}$/);
    expect(buildSelection("auto")).toEqual({ cmakeOptions: { [PATCH_CMAKE_OPTION]: patchKey() } });
    expect(buildSelection("patched")).toEqual(buildSelection("auto"));
    expect(buildSelection("prebuilt")).toEqual({});
  });

  it("keys the build by all its patches as scripts/build-engine.sh does, so the folder it builds is the one loaded", () => {
    const script = spawnSync("bash", [path.join(repoRoot, "scripts/build-engine.sh"), "--key"], { encoding: "utf8" });
    expect(script.status, script.stderr).toBe(0);
    expect(script.stdout.trim()).toBe(patchKey());
  });

  it("reads ENGINE_BUILD through its one declaration, refusing anything else with one line", () => {
    expect(defaultBuildChoice({})).toBe("auto");
    expect(defaultBuildChoice({ ENGINE_BUILD: "prebuilt" })).toBe("prebuilt");
    expect(() => defaultBuildChoice({ ENGINE_BUILD: "fast" })).toThrow("ENGINE_BUILD=fast: must be auto, prebuilt or patched");
    expect(() => loadConfig({ ENGINE_BUILD: "fast" })).toThrow("ENGINE_BUILD=fast: must be auto, prebuilt or patched");
    expect(loadConfig({}).engine.kvUnified).toBe("auto");
    expect(loadConfig({ KV_UNIFIED: "AUTO" }).engine.kvUnified).toBe("auto");
    expect(loadConfig({ KV_UNIFIED: "on" }).engine.kvUnified).toBe(true);
    expect(loadConfig({ KV_UNIFIED: "0" }).engine.kvUnified).toBe(false);
    expect(() => loadConfig({ KV_UNIFIED: "sometimes" })).toThrow("KV_UNIFIED=sometimes: must be auto, true or false");
    expect(missingPatchedBuild()).toContain("npm run build:engine");
  });
});

describe("scripts/build-engine.sh without a compiler", () => {
  const bin = tempDir("obi-nocc");
  it("exits 1 with one line naming what is missing, and leaves the prebuilt engine", () => {
    // A PATH with what the script needs before it builds, and no cmake.
    for (const tool of ["bash", "node", "dirname", "cat"]) {
      const found = spawnSync("bash", ["-c", `command -v ${tool}`], { encoding: "utf8" }).stdout.trim();
      if (found) symlinkSync(found, path.join(bin, tool));
    }
    const run = spawnSync(path.join(bin, "bash"), [path.join(repoRoot, "scripts/build-engine.sh")], {
      env: { PATH: bin, HOME: os.tmpdir() },
      encoding: "utf8",
    });
    expect(run.status).toBe(1);
    expect(run.stdout).toBe("");
    const lines = run.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^build-engine: cmake is not installed .*the prebuilt engine stays$/);
  });
});

// A native build compiles the kernels of the CPU it is built on, some of which a compiler can get wrong only there:
// GCC 12 emptied the AMX tile config (engine/native/llama.cpp-amx-tile-config.patch), and every step of more than one
// token on a quantized model then died of SIGILL. Each build runs such steps in a process of its own. The same process
// says whether its KV cache carries the huge-page advice (engine/native/llama.cpp-huge-pages.patch): the patched
// build's does, the prebuilt one's does not; a kernel without transparent huge pages refuses it, and is not asked.
const thp = existsSync("/sys/kernel/mm/transparent_hugepage/enabled");
if (!thp) console.warn("this kernel has no transparent huge pages: the huge-page advice is not checked");
describe.each([
  ["prebuilt", false],
  ["patched", !patchedBuilt],
] as const)("the %s build on this CPU", (build, skip) => {
  it.skipIf(skip)(
    "runs steps of several tokens on a quantized model (Q8_0) to their end, its large buffers advised onto huge pages or not",
    () => {
      const run = spawnSync(process.execPath, entryArgs("tests/engine/quantized-step.ts", ["--expose-gc"]).concat(build), {
        cwd: repoRoot,
        encoding: "utf8",
        timeout: 120_000,
      });
      const why = run.signal === "SIGILL" ? "it died of SIGILL: a kernel this CPU cannot run" : run.stderr;
      expect(run.status, why).toBe(0);
      const said = JSON.parse(run.stdout.trim().split("\n").at(-1) ?? "") as { build: string; tokens: number[]; advised: number | null };
      expect({ build: said.build, tokens: said.tokens }).toEqual({ build, tokens: [4, 4, 4, 4] });
      if (thp && build === "patched") expect(said.advised).toBeGreaterThanOrEqual(1);
      if (thp && build === "prebuilt") expect(said.advised).toBe(0);
    },
    150_000,
  );
});
