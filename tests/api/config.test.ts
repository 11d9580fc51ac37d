// Configuration is read and validated once, failing with one message that names the setting.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../api/config.js";

describe("loadConfig", () => {
  it("defaults REPRODUCIBLE to false and reads true/false words", () => {
    expect(loadConfig({}).engine.reproducible).toBe(false);
    for (const v of ["true", "1", "yes", "ON"]) expect(loadConfig({ REPRODUCIBLE: v }).engine.reproducible, v).toBe(true);
    for (const v of ["false", "0", "no", "off"]) expect(loadConfig({ REPRODUCIBLE: v }).engine.reproducible, v).toBe(false);
  });

  it("refuses a value it cannot read, naming the setting", () => {
    expect(() => loadConfig({ REPRODUCIBLE: "maybe" })).toThrow(ConfigError);
    expect(() => loadConfig({ REPRODUCIBLE: "maybe" })).toThrow("invalid configuration: REPRODUCIBLE=maybe: must be true or false");
    expect(() => loadConfig({ THREADS: "abc" })).toThrow("invalid configuration: THREADS=abc: must be a whole number >= 0");
    expect(() => loadConfig({ SEQUENCES: "-2" })).toThrow("SEQUENCES=-2: must be a whole number >= 0");
    expect(() => loadConfig({ PORT: "70000" })).toThrow("PORT=70000: must be a port number, 0 to 65535");
    expect(() => loadConfig({ GPU: "metal" })).toThrow("GPU=metal: must be auto, cuda, vulkan or false");
    expect(() => loadConfig({ LOG_LEVEL: "loud" })).toThrow("LOG_LEVEL=loud: must be one of");
  });

  it("names the YAML key and file when the mistake is in MODEL_CONFIG", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "obi-yaml-"));
    try {
      const file = path.join(dir, "c.yaml");
      writeFileSync(file, "engine:\n  threads: many\n");
      expect(() => loadConfig({ MODEL_CONFIG: file })).toThrow(`engine.threads: "many" in ${file}: must be a whole number >= 0`);
      // The environment wins over the file, and is what the message names.
      expect(() => loadConfig({ MODEL_CONFIG: file, THREADS: "x" })).toThrow("THREADS=x:");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
