// LoRA adapters in the models file: each a model of its own (its name, price and defaults, else the base's), a typo
// under `adapters` refused naming the field, an adapter that does not fit its base refused at start in one line
// naming both, and the router holding the base while an adapter is in use (backends that record their lifecycle;
// tests/engine/lora.int.test.ts and tests/e2e/lora-adapters.int.test.ts run them on real engines).
import { readFileSync } from "node:fs";
import path from "node:path";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { loadRegistry } from "../../backends/build.js";
import { catalogueOf, ModelRegistry, type ModelSpec, parseModelsFile, registryOfCatalogues } from "../../backends/registry.js";
import { ModelRouter } from "../../backends/router.js";
import { loadConfig } from "../../config/config.js";
import { buildLoraAdapter } from "../../engine/gguf/lora-adapter.js";
import { writeGgufFile } from "../../engine/gguf/writer.js";
import { writeGeneratedLora } from "../../engine/load/generated-lora.js";
import { writeGeneratedModel } from "../../engine/load/generated-model.js";
import { loraMismatch } from "../../engine/load/lora-check.js";
import type { InferenceBackend } from "../../openai/backend.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("adapters");
const FILE = `
models:
  - name: base
    local:
      path: ./base.gguf
      adapters:
        - { name: sentiment-v2, path: ./sentiment-v2.gguf, scale: 0.5, price: { input_per_million: 1, output_per_million: 2 } }
        - { name: summary-v1, aliases: [summary], path: /abs/summary.gguf }
    price: { input_per_million: 0.1, output_per_million: 0.2 }
    defaults: { temperature: 0 }
`;

describe("adapters in the models file", () => {
  it("are models of their own after their base: the base's settings, the adapter's file, its price or the base's", () => {
    const r = parseModelsFile(FILE, "/etc/obi/models.yaml", {});
    expect(r.models.map((m) => [m.name, m.parent])).toEqual([
      ["base", undefined],
      ["sentiment-v2", "base"],
      ["summary-v1", "base"],
    ]);
    expect(r.get("sentiment-v2")?.backend).toMatchObject({
      kind: "local",
      path: "/etc/obi/base.gguf",
      adapter: { path: "/etc/obi/sentiment-v2.gguf", scale: 0.5 },
    });
    expect(r.resolve("summary")?.backend).toMatchObject({ adapter: { path: "/abs/summary.gguf", scale: 1 } });
    expect(r.get("sentiment-v2")?.price).not.toEqual(r.get("base")?.price);
    expect(r.get("summary-v1")?.price).toEqual(r.get("base")?.price);
    expect(r.get("summary-v1")?.defaults).toEqual({ temperature: 0 });
    // An API server learns the parent from the workers' catalogue.
    expect(registryOfCatalogues([catalogueOf(r)]).get("summary-v1")?.parent).toBe("base");
  });

  it("a typo under adapters is refused naming the field", () => {
    const typo = FILE.replace("scale: 0.5", "scael: 0.5");
    expect(() => parseModelsFile(typo, "models.yaml", {})).toThrow(/models\.0\.local\.adapters\.0.*scael/);
    const unnamed = FILE.replace("name: sentiment-v2, ", "");
    expect(() => parseModelsFile(unnamed, "models.yaml", {})).toThrow(/models\.0\.local\.adapters\.0\.name/);
    const taken = FILE.replace("name: summary-v1", "name: base");
    expect(() => parseModelsFile(taken, "models.yaml", {})).toThrow(/the name 'base' is given to two models/);
    for (const scale of [1e308, -11])
      expect(() => parseModelsFile(FILE.replace("scale: 0.5", `scale: ${scale}`), "models.yaml", {})).toThrow(
        /local\.adapters\.0\.scale: must be between -10 and 10 \(1 applies it as trained\)/,
      );
    expect(() => parseModelsFile(FILE.replace("scale: 0.5", "scale: -1"), "models.yaml", {})).not.toThrow();
    const remote = FILE.replace("/abs/summary.gguf", "hf:Owner/Repo:Q8_0");
    expect(() => parseModelsFile(remote, "models.yaml", {})).toThrow(/local\.adapters\.1\.path: an adapter must be a local \.gguf file/);
  });
});

describe("an adapter against its base's header", () => {
  it("fits the generated model it was made for, and is refused on another, naming what differs", async () => {
    const base = await scratch.file("base.gguf");
    await writeGeneratedModel(base, { preset: "tiny" });
    const adapter = await scratch.file("a.gguf");
    await writeGeneratedLora(base, adapter, 2);
    expect(await loraMismatch(base, adapter)).toBeUndefined();

    const reranker = await scratch.file("reranker.gguf");
    await writeGeneratedModel(reranker, { preset: "reranker" });
    expect(await loraMismatch(reranker, adapter)).toMatch(/^it is for llama, the base is qwen3, \d+ wide$/);
    // Same architecture, twice as wide.
    const wide = await scratch.file("wide.gguf");
    const header = {
      metadata: { general: { architecture: "llama" } },
      fullTensorInfo: [{ name: "blk.0.attn_q.weight", dimensions: [128, 128] }],
    };
    await writeGgufFile(wide, buildLoraAdapter(header as never, 3));
    expect(await loraMismatch(base, wide)).toBe(
      "it adapts blk.0.attn_q.weight as 128 inputs by 128 outputs, the base's is 64 by 64 (llama, 64 wide)",
    );
    expect(await loraMismatch(base, base)).toMatch(/^it is not a LoRA adapter/);
    await expect(loraMismatch(base, `${base}.missing`)).rejects.toThrow(`${base}.missing cannot be read (ENOENT)`);
  });

  it("a mismatched adapter stops the start with one line naming both", async () => {
    const base = await scratch.file("base2.gguf");
    await writeGeneratedModel(base, { preset: "tiny" });
    const dir = path.dirname(base);
    const file = await scratch.write(
      `models:\n  - name: tiny\n    local:\n      path: ${base}\n      adapters: [{ name: wide-v1, path: ${path.join(dir, "wide.gguf")} }]\n`,
      "models.yaml",
    );
    const wide = path.join(dir, "wide.gguf");
    const header = {
      metadata: { general: { architecture: "llama" } },
      fullTensorInfo: [{ name: "blk.0.attn_q.weight", dimensions: [128, 128] }],
    };
    await writeGgufFile(wide, buildLoraAdapter(header as never, 3));
    const err = await loadRegistry(loadConfig({ MODELS_FILE: file }), pino({ level: "silent" })).catch((e: Error) => e);
    expect(String((err as Error).message)).toMatch(
      /^MODELS_FILE=.*models\.yaml: adapter 'wide-v1' \(.*wide\.gguf\) does not fit its base 'tiny' \(.*base2\.gguf\): it adapts blk\.0\.attn_q\.weight as 128 inputs by 128 outputs, the base's is 64 by 64 \(llama, 64 wide\)$/,
    );
    expect((err as Error).message).not.toContain("\n");

    // A wrong path is said as one, not as a misfit.
    const typo = await scratch.write(readFileSync(file, "utf8").replace("wide.gguf", "wdie.gguf"), "typo.yaml");
    const missing = await loadRegistry(loadConfig({ MODELS_FILE: typo }), pino({ level: "silent" })).catch((e: Error) => e);
    expect(String((missing as Error).message)).toMatch(
      /^MODELS_FILE=.*typo\.yaml: adapter 'wide-v1': .*wdie\.gguf cannot be read \(ENOENT\)$/,
    );
  });
});

describe("the router and adapters", () => {
  it("an adapter holds its base while a batch uses it; the base then idles as a base does", async () => {
    const events: string[] = [];
    const base: ModelSpec = { name: "base", aliases: [], backend: { kind: "local", path: "/m/base.gguf" } };
    const adapter: ModelSpec = {
      name: "lora",
      aliases: [],
      parent: "base",
      backend: { kind: "local", path: "/m/base.gguf", adapter: { path: "/m/l.gguf", scale: 1 } },
    };
    const fake = (name: string) =>
      ({ info: { model: name }, close: async () => void events.push(`close ${name}`) }) as unknown as InferenceBackend;
    const router = new ModelRouter({
      registry: new ModelRegistry([base, adapter]),
      memoryBudgetBytes: 100,
      idleUnloadMs: 0,
      log: () => {},
      factory: {
        footprint: async () => 10,
        local: async (spec) => {
          events.push(`load ${spec.name}`);
          return fake(spec.name);
        },
        adapter: (spec, over) => {
          events.push(`adapter ${spec.name} over ${over.info.model}`);
          return fake(spec.name);
        },
        upstream: () => {
          throw new Error("none");
        },
      },
    });
    const lease = await router.acquire("lora");
    expect(lease.backend.info.model).toBe("lora");
    expect(router.status().map((s) => [s.name, s.state, s.batches])).toEqual([
      ["base", "loaded", 1],
      ["lora", "loaded", 1],
    ]);
    lease.release();
    await new Promise((r) => setTimeout(r, 0));
    expect(router.status().map((s) => [s.name, s.state, s.batches])).toEqual([
      ["base", "loaded", 0],
      ["lora", "unloaded", 0],
    ]);
    expect(events).toEqual(["load base", "adapter lora over base", "close lora"]);
    await router.close();
  });
});
