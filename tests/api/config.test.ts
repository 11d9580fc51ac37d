// Configuration is read and validated once, failing with one message that names the setting.
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
    expect(() => loadConfig({ REPRODUCIBLE: "maybe" })).toThrow(/REPRODUCIBLE must be true or false/);
    expect(() => loadConfig({ SEQUENCES: "-2" })).toThrow(/engine\.sequences/);
  });
});
