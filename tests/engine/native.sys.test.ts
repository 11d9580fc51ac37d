// Which node-llama-cpp build the engine loads (engine/load/native.ts) and what the build script says where it cannot
// build: one line, and the prebuilt engine stays.
import { spawnSync } from "node:child_process";
import { mkdtempSync, symlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../config/config.js";
import { buildSelection, defaultBuildChoice, missingPatchedBuild, PATCH_CMAKE_OPTION, patchKey } from "../../engine/load/native.js";
import { repoRoot } from "../../testkit/repo-root.js";

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
  it("exits 1 with one line naming what is missing, and leaves the prebuilt engine", () => {
    // A PATH with what the script needs before it builds, and no cmake.
    const bin = mkdtempSync(path.join(os.tmpdir(), "obi-nocc-"));
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
