// What a local model's cached answers are keyed by besides its weights: the engine's settings that change them.
// FLASH_ATTENTION joins the key only where it is set, so the answers stored before it existed are still found.
import { describe, expect, it } from "vitest";
import { engineIdentity } from "../../backends/build.js";
import type { InferenceBackend } from "../../openai/backend.js";

const settings = { engineBuild: "prebuilt", contextSize: 1024, reproducible: false, kvUnified: false, gpu: false, chatWrapper: "General" };
const backend = (more: Record<string, unknown> = {}) => ({ info: { settings: { ...settings, ...more } } }) as unknown as InferenceBackend;

describe("a local engine's identity", () => {
  it("is what it was before FLASH_ATTENTION existed while the setting is auto, whatever the engine chose", () => {
    const before = engineIdentity(backend(), "auto");
    expect(before.settings).not.toHaveProperty("flashAttention");
    expect(engineIdentity(backend({ flashAttention: false }), "auto")).toEqual(before);
  });

  it("differs when flash attention is asked on or off, and between the two", () => {
    const on = engineIdentity(backend({ flashAttention: true }), true);
    const off = engineIdentity(backend({ flashAttention: false }), false);
    expect(on.settings).toMatchObject({ flashAttention: true });
    expect(off.settings).toMatchObject({ flashAttention: false });
    expect(on).not.toEqual(engineIdentity(backend(), "auto"));
  });
});
