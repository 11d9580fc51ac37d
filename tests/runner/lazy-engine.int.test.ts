// The runner's model waits for its first request the result cache cannot answer: a run answered wholly from the
// cache loads no model, one with a changed line loads it then and answers that line as a run without the cache does,
// and an engine record that no longer matches the engine stops the run as a failed load would, mended for the next.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import pino from "pino";
import { beforeAll, describe, expect, it } from "vitest";
import { createRouter } from "../../backends/build.js";
import { singleModelRegistry } from "../../backends/registry.js";
import { openEmbeddedCache } from "../../cache/open.js";
import { type Config, loadConfig } from "../../config/config.js";
import { writeGeneratedModel } from "../../engine/load/generated-model.js";
import { parseRequest } from "../../parse/request.js";
import { runFile } from "../../runner/run-file.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("lazy-engine");
let dir: string;
let config: Config;
const LINES = 12;

beforeAll(async () => {
  dir = path.dirname(await scratch.write("", "keep"));
  const model = path.join(dir, "model.gguf");
  await writeGeneratedModel(model, { preset: "tiny", seed: 3 });
  config = loadConfig({ MODEL_PATH: model, BATCH_DIR: dir, THREADS: "1", SEQUENCES: "4", CONTEXT_SIZE: "256" });
});

const line = (i: number, text: string) =>
  JSON.stringify({
    custom_id: `r${i}`,
    method: "POST",
    url: "/v1/completions",
    body: { model: "m", prompt: text, max_tokens: 4, temperature: 0 },
  });

function writeInput(changed: number[] = []): string {
  const input = path.join(dir, "in.jsonl");
  const lines = Array.from({ length: LINES }, (_, i) => line(i, changed.includes(i) ? `another text ${i}` : `the text of line ${i}`));
  writeFileSync(input, `${lines.join("\n")}\n`);
  return input;
}

/** A run of the input with the log's messages kept: "model loaded" says the engine came up. */
async function run(input: string, extra: Partial<Config> = {}, overwrite = true) {
  const messages: string[] = [];
  const logger = pino({ level: "info" }, { write: (s: string) => messages.push((JSON.parse(s) as { msg: string }).msg) });
  const output = path.join(dir, "out.jsonl");
  const errors = path.join(dir, "err.jsonl");
  const summary = await runFile({ input, output, errors, config: { ...config, ...extra }, logger, overwrite });
  const read = (f: string | null) => (f ? readFileSync(f, "utf8").trim().split("\n").filter(Boolean) : []);
  const texts = Object.fromEntries(
    read(summary.output).map((l) => {
      const { custom_id, response } = JSON.parse(l) as { custom_id: string; response: { body: { choices: Array<{ text: string }> } } };
      return [custom_id, response.body.choices[0].text];
    }),
  );
  return { summary, loaded: messages.includes("model loaded"), texts, errorLines: read(summary.errors) };
}

describe("the runner's lazy model", () => {
  it("loads no model for a run the cache answers whole, and loads it for a changed line, answering it as an uncached run", async () => {
    const first = await run(writeInput());
    expect(first).toMatchObject({ loaded: true, summary: { completed: LINES, cached: 0 } });

    const again = await run(writeInput());
    expect(again).toMatchObject({ loaded: false, summary: { completed: LINES, cached: LINES } });
    expect(again.texts).toEqual(first.texts);

    const changed = await run(writeInput([5]));
    expect(changed).toMatchObject({ loaded: true, summary: { completed: LINES, failed: 0, cached: LINES - 1 } });
    const uncached = await run(writeInput([5]), { resultCache: { ...config.resultCache, enabled: false } });
    expect(uncached.summary).toMatchObject({ completed: LINES, cached: 0 });
    expect(changed.texts).toEqual(uncached.texts);
  });

  it("an engine record that no longer matches the engine stops the run as a failed load, is mended, and the run resumes", async () => {
    await run(writeInput());
    const file = path.join(dir, "cache", "engines.json");
    const records = JSON.parse(readFileSync(file, "utf8")) as Record<string, { identity: string }>;
    // As if the engine changed since the record was written: every line's key is another, so each needs the engine.
    for (const r of Object.values(records)) r.identity = r.identity.replace('"build":"', '"build":"other-');
    writeFileSync(file, JSON.stringify(records));

    await expect(run(writeInput())).rejects.toThrow(/The model 'm.*' could not be loaded: the engine that came up is not the one/);
    // Nothing was written for the lines that waited for it: the run resumes them.
    for (const f of ["out.jsonl", "err.jsonl"])
      expect(existsSync(path.join(dir, f)) ? readFileSync(path.join(dir, f), "utf8").trim() : "").toBe("");

    const resumed = await run(writeInput(), {}, false);
    expect(resumed).toMatchObject({ loaded: false, summary: { completed: LINES, failed: 0, cached: LINES } });
  });

  it("a model file replaced after the run began is not loaded under the content hashed then: the load fails, nothing is stored", async () => {
    await run(writeInput());
    const registry = singleModelRegistry(config.modelPath, false);
    const opened = await openEmbeddedCache(config.batchDir, config.resultCache);
    const router = await createRouter(config, registry, pino({ level: "silent" }), process.env, { ...opened, lazyLoad: true });
    try {
      const lease = await router.acquire(registry.names[0]);
      await writeGeneratedModel(config.modelPath, { preset: "tiny", seed: 6 });
      const request = parseRequest("/v1/completions", { model: "m", prompt: "a line no run asked", max_tokens: 4, temperature: 0 });
      await expect(lease.backend.execute(request)).rejects.toThrow("the model file changed while the run used it");
      lease.release();
    } finally {
      await router.close();
      await opened.cache.close();
    }
    // The new file's first run computes every line, as a run without the cache does.
    const fresh = await run(writeInput());
    const uncached = await run(writeInput(), { resultCache: { ...config.resultCache, enabled: false } });
    expect(fresh).toMatchObject({ loaded: true, summary: { completed: LINES, cached: 0 } });
    expect(fresh.texts).toEqual(uncached.texts);
  });
});
