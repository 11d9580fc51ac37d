// LoRA adapters on the real library: each adapter answers on contexts of its own over the base's weights, its greedy
// answers differ from the base's and stay the same across runs and whatever else runs beside them, and adapters'
// contexts beyond the memory budget are closed least recently used first.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, type Engine, type LoraAdapter } from "../../engine/index.js";
import { writeGeneratedLora } from "../../engine/load/generated-lora.js";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("lora");
const greedy = { temperature: 0, maxTokens: 8 };
const PROMPTS = ["Once upon a time", "The little dog", "In the park there was", "She said hello to"];

let base: string;
let adapters: LoraAdapter[];
const engines: Engine[] = [];
const notes: string[] = [];

async function open(adapterMemoryBytes?: number): Promise<Engine> {
  const engine = await createEngine({
    modelPath: base,
    generatedModel: true,
    gpu: false,
    threads: 1,
    sequences: 4,
    contexts: 1,
    contextSize: 256,
    embeddingContexts: 1,
    adapterMemoryBytes,
    log: (msg) => notes.push(msg),
  });
  engines.push(engine);
  return engine;
}

beforeAll(async () => {
  base = await ensureGeneratedModel();
  adapters = [];
  for (const [i, name] of ["alpha", "beta", "gamma"].entries()) {
    const path = await scratch.file(`${name}.gguf`);
    await writeGeneratedLora(base, path, i + 2);
    adapters.push({ name, path, scale: 1 });
  }
});
afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
});

const answers = (engine: Engine, prompts = PROMPTS) => Promise.all(prompts.map((p) => engine.complete(p, greedy).then((r) => r.text)));

describe("LoRA adapters", () => {
  it("an adapter's greedy answers differ from the base's and are the same on every run", async () => {
    const engine = await open();
    const view = engine.withAdapter!(adapters[0]!);
    const [plain, first, again] = [await answers(engine), await answers(view), await answers(view)];
    expect(first).toEqual(again);
    for (const [i, text] of first.entries()) expect(text, PROMPTS[i]).not.toBe(plain[i]);
    // Two adapters differ from each other too: each context applies its own.
    expect(await answers(engine.withAdapter!(adapters[1]!))).not.toEqual(first);
  });

  it("lines of the base and three adapters run interleaved, each as it runs alone", async () => {
    const engine = await open();
    const views = [engine, ...adapters.map((a) => engine.withAdapter!(a))];
    const alone: string[][] = [];
    for (const v of views) alone.push(await answers(v));
    // Every prompt on every model, interleaved: the base, alpha, beta, gamma, the base, ...
    const mixed = await Promise.all(PROMPTS.flatMap((p) => views.map((v) => v.complete(p, greedy).then((r) => r.text))));
    const byModel = views.map((_, m) => PROMPTS.map((_, p) => mixed[p * views.length + m]));
    expect(byModel).toEqual(alone);
  });

  it("adapters beyond the memory budget take turns: the least recently used one's contexts are closed", async () => {
    notes.length = 0;
    // One adapter's contexts at a time.
    const engine = await open(1);
    const [a, b] = adapters.map((x) => engine.withAdapter!(x));
    const first = await answers(a!);
    await answers(b!);
    expect(notes.filter((n) => n.startsWith("closing an idle adapter's contexts"))).toHaveLength(1);
    // Made again on demand, with the same answers.
    expect(await answers(a!)).toEqual(first);
    expect(notes.filter((n) => n.startsWith("closing an idle adapter's contexts"))).toHaveLength(2);
  });

  it("an adapter's view refuses embeddings (they run on the base's contexts) and closing it leaves the base open", async () => {
    const engine = await open();
    const view = engine.withAdapter!(adapters[2]!);
    await expect(view.embed(["x"])).rejects.toThrow(/cannot compute embeddings/);
    await view.close();
    expect((await engine.complete("Once", greedy)).text.length).toBeGreaterThan(0);
  });
});
