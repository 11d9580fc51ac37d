// The runner's result cache on the generated model: a dataset job run again computes only its changed rows, another
// output of the same job computes nothing, --no-cache computes everything, and a model file rewritten under the same
// path is another model (no stale answer).
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import pino from "pino";
import { beforeAll, describe, expect, it } from "vitest";
import { type Config, loadConfig } from "../../config/config.js";
import { writeGeneratedModel } from "../../engine/load/generated-model.js";
import { runFile } from "../../runner/run-file.js";
import { datasetCli } from "../helpers/dataset-cli.js";
import { startModelHost } from "../helpers/model-host.js";
import { scratchDir } from "../helpers/scratch.js";
import { readTable } from "../helpers/tables.js";

const scratch = scratchDir("runner-cache");
let dir: string;
let model: string;
let config: Config;
const ROWS = 50;

beforeAll(async () => {
  dir = path.dirname(await scratch.write("", "keep"));
  model = path.join(dir, "model.gguf");
  await writeGeneratedModel(model, { preset: "tiny", seed: 1 });
  // The cache beside this test's own BATCH_DIR: no other run's answers.
  config = loadConfig({ MODEL_PATH: model, BATCH_DIR: dir, THREADS: "1", SEQUENCES: "4", CONTEXT_SIZE: "256" });
});

const batch = (...argv: string[]) => datasetCli(dir, config, ...argv);

function writeRows(changed: number[] = []) {
  const rows = Array.from({ length: ROWS }, (_, i) => `${i},${changed.includes(i) ? `changed text ${i}` : `the text of row ${i}`}`);
  writeFileSync(path.join(dir, "rows.csv"), `id,text\n${rows.join("\n")}\n`);
}

function writeJob(output: string) {
  const job = path.join(dir, "label.yaml");
  writeFileSync(
    job,
    ["input: rows.csv", "prompt: 'Label: {{text}}'", "params: { max_tokens: 4, temperature: 0 }", `output: ${output}`].join("\n"),
  );
  return job;
}

/**
 * "…, 49 of this run's answered from the cache" in a run's summary, or "50 answered from the result cache" where the
 * job's answers were remembered whole; 0 where it says neither.
 */
const cachedOf = (stdout: string) =>
  Number(/(\d+) of this run's answered from the cache|(\d+) answered from the result cache/.exec(stdout)?.slice(1).find(Boolean) ?? 0);
/** The job was answered whole: one read of the cache, no row's request rendered or run. */
const wholeFromCache = (stdout: string) => /rows \(\d+ answered from the result cache/.test(stdout);

describe("the runner's result cache", () => {
  it("a dataset job again: unchanged computes nothing, 2% changed computes those rows, another -o nothing, --no-cache all", async () => {
    writeRows();
    const first = await batch("--job", writeJob("out.csv"));
    expect(first.code, first.stderr).toBe(0);
    expect(cachedOf(first.stdout)).toBe(0);
    const answers = (await readTable(path.join(dir, "out.csv"))).rows;
    expect(answers).toHaveLength(ROWS);

    const again = await batch("--job", writeJob("out.csv"), "--overwrite", "--keep-work");
    expect(again.code, again.stderr).toBe(0);
    expect(cachedOf(again.stdout)).toBe(ROWS);
    expect(wholeFromCache(again.stdout), again.stdout).toBe(true);
    // Nothing was rendered or run: no working file is left to keep.
    expect(again.stderr).toContain("no request was written or run, so the working folder held nothing to keep");
    expect(readdirSync(dir).filter((f) => f.endsWith(".work"))).toEqual([]);
    // The same answers; each now reports its whole prompt cached, where the first run reported what the engine's
    // prefix reuse saved.
    const reread = (await readTable(path.join(dir, "out.csv"))).rows;
    expect(reread.map(({ result_cached_tokens: _c, ...r }) => r)).toEqual(answers.map(({ result_cached_tokens: _c, ...r }) => r));
    for (const r of reread) expect(r.result_cached_tokens).toBe(r.result_prompt_tokens);

    writeRows([7]);
    const changed = await batch("--job", writeJob("out.csv"), "--overwrite");
    expect(changed.code, changed.stderr).toBe(0);
    expect(cachedOf(changed.stdout)).toBe(ROWS - 1);
    expect(wholeFromCache(changed.stdout)).toBe(false);

    const other = await batch("--job", writeJob("other.parquet"));
    expect(other.code, other.stderr).toBe(0);
    const computed = /(\d+) requests/.exec(other.stdout);
    // Joined from the job's record, or run with every answer from the cache: no row computes either way.
    if (computed) expect(cachedOf(other.stdout)).toBe(Number(computed[1]));
    expect((await readTable(path.join(dir, "other.parquet"))).rows).toHaveLength(ROWS);

    // --no-cache computes: neither the cache nor another output of the job answers a row.
    for (const output of ["out.csv", "third.csv"]) {
      const off = await batch("--job", writeJob(output), "--overwrite", "--no-cache");
      expect(off.code, off.stderr).toBe(0);
      expect(cachedOf(off.stdout)).toBe(0);
      expect(off.stdout).toMatch(new RegExp(`${ROWS} requests`));
      expect(off.stdout).not.toContain("joined from");
    }
  });

  it("a job is answered whole only where each row's answer would be: a sampled row, a module of its own or a failed row leave it row by row", async () => {
    writeRows();
    const job = (name: string, lines: string[]) => {
      const file = path.join(dir, `${name}.yaml`);
      writeFileSync(file, ["input: rows.csv", "prompt: 'Say: {{text}}'", `output: ${name}.csv`, ...lines].join("\n"));
      return file;
    };
    // One row in fifty samples (its temperature from its column): every other row is remembered, the job is not whole.
    const temps = Array.from({ length: ROWS }, (_, i) => `${i},row ${i},${i === 3 ? 0.7 : 0}`);
    writeFileSync(path.join(dir, "temps.csv"), `id,text,temp\n${temps.join("\n")}\n`);
    const sampled = path.join(dir, "sampled.yaml");
    writeFileSync(
      sampled,
      [
        "input: temps.csv",
        "prompt: 'Say: {{text}}'",
        "output: sampled.csv",
        "params: { max_tokens: 4 }",
        "params_from: { temperature: temp }",
      ].join("\n"),
    );
    writeFileSync(path.join(dir, "post.mjs"), "export default (row, response) => ({ length: response.choices[0].text.length });\n");
    const post = job("post", ["params: { max_tokens: 4, temperature: 0 }", "postprocess: post.mjs"]);
    // One row's prompt longer than the context: it fails, every time.
    const texts = Array.from({ length: ROWS }, (_, i) => `${i},${i === 5 ? "word ".repeat(400) : `row ${i}`}`);
    writeFileSync(path.join(dir, "long.csv"), `id,text\n${texts.join("\n")}\n`);
    const long = path.join(dir, "long.yaml");
    writeFileSync(
      long,
      ["input: long.csv", "prompt: 'Say: {{text}}'", "output: long.csv.out.csv", "params: { max_tokens: 4, temperature: 0 }"].join("\n"),
    );
    for (const [file, cached] of [
      [sampled, ROWS - 1],
      [post, ROWS],
      [long, ROWS - 1],
    ] as const) {
      expect((await batch("--job", file)).code).toBe(0);
      const again = await batch("--job", file, "--overwrite");
      expect(again.code, again.stderr).toBe(0);
      expect(wholeFromCache(again.stdout), file).toBe(false);
      expect(cachedOf(again.stdout), file).toBe(cached);
    }
    // --no-cache neither reads nor remembers: the run after it is still answered whole, from before.
    const plain = job("plain", ["params: { max_tokens: 4, temperature: 0 }"]);
    expect(wholeFromCache((await batch("--job", plain)).stdout)).toBe(false);
    expect(wholeFromCache((await batch("--job", plain, "--overwrite", "--no-cache")).stdout)).toBe(false);
    expect(wholeFromCache((await batch("--job", plain, "--overwrite")).stdout)).toBe(true);
  });

  it("a job over a model named by a download reference is answered whole too, the download found where it was put", async () => {
    const host = await startModelHost();
    try {
      host.put("/Owner/Tiny-GGUF/resolve/main/tiny-q8_0.gguf", readFileSync(model));
      host.manifest("Owner", "Tiny-GGUF", "Q8_0", "tiny-q8_0.gguf");
      const modelsDir = path.join(dir, "downloads");
      const hub = { ...config, modelPath: "hf:Owner/Tiny-GGUF:Q8_0", modelsDir, hfEndpoint: host.url };
      writeRows();
      const job = writeJob("hub.csv");
      const first = await datasetCli(dir, hub, "--job", job);
      expect(first.code, first.stderr).toBe(0);
      expect(wholeFromCache(first.stdout)).toBe(false);
      const asked = host.requests.length;
      const again = await datasetCli(dir, hub, "--job", job, "--overwrite");
      expect(again.code, again.stderr).toBe(0);
      expect(wholeFromCache(again.stdout), again.stdout).toBe(true);
      expect(host.requests).toHaveLength(asked);
    } finally {
      await host.close();
    }
  });

  it("a model file rewritten under the same path is another model: its first run answers nothing from the cache", async () => {
    const input = path.join(dir, "lines.jsonl");
    const line = (i: number) =>
      JSON.stringify({
        custom_id: `r${i}`,
        method: "POST",
        url: "/v1/chat/completions",
        body: { model: "m", messages: [{ role: "user", content: `say ${i}` }], max_tokens: 4, temperature: 0 },
      });
    writeFileSync(input, `${[0, 1, 2, 3].map(line).join("\n")}\n`);
    const opts = { input, output: path.join(dir, "lines.out.jsonl"), errors: path.join(dir, "lines.err.jsonl"), config };
    const logger = pino({ level: "silent" });
    expect((await runFile({ ...opts, logger, overwrite: true })).cached).toBe(0);
    expect((await runFile({ ...opts, logger, overwrite: true })).cached).toBe(4);
    await writeGeneratedModel(model, { preset: "tiny", seed: 2 });
    const after = await runFile({ ...opts, logger, overwrite: true });
    expect(after).toMatchObject({ completed: 4, cached: 0 });
    expect(readFileSync(opts.output, "utf8").trim().split("\n")).toHaveLength(4);
    expect((await runFile({ ...opts, logger, overwrite: true })).cached).toBe(4);
  });

  it("a dataset job's output from another model file is not current: the job says so, and --overwrite runs it on the new one", async () => {
    writeRows();
    const job = writeJob("by-model.csv");
    await writeGeneratedModel(model, { preset: "tiny", seed: 4 });
    const first = await batch("--job", job);
    expect(first.code, first.stderr).toBe(0);
    const before = (await readTable(path.join(dir, "by-model.csv"))).rows;
    await writeGeneratedModel(model, { preset: "tiny", seed: 5 });
    const stale = await batch("--job", job);
    expect(stale.code).toBe(2);
    expect(stale.stderr).toContain("was written by an earlier version of this job (its input or model changed since)");
    // Refused, the job's record is as it was: the first model again (the same content) finds its output complete.
    await writeGeneratedModel(model, { preset: "tiny", seed: 4 });
    expect((await batch("--job", job)).stderr).toContain("is complete already");
    await writeGeneratedModel(model, { preset: "tiny", seed: 5 });
    // Another output computes on the new model; the old one, replaced, then reads those answers from the cache.
    const runs = [
      { argv: ["--job", job, "-o", "by-model.parquet"], cached: 0 },
      { argv: ["--job", job, "--overwrite"], cached: ROWS },
    ];
    for (const { argv, cached } of runs) {
      const again = await batch(...argv);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).not.toContain("joined from");
      expect(cachedOf(again.stdout)).toBe(cached);
    }
    const after = (await readTable(path.join(dir, "by-model.csv"))).rows;
    expect(typeof before[0].result_text).toBe("string");
    expect(after.map((r) => r.result_text)).not.toEqual(before.map((r) => r.result_text));
  });

  it("a BATCH_DIR where no cache can be opened (a file) costs the run its reuse, not the run", async () => {
    const input = path.join(dir, "plain.jsonl");
    const body = { model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 2, temperature: 0 };
    writeFileSync(input, `${JSON.stringify({ custom_id: "x", method: "POST", url: "/v1/chat/completions", body })}\n`);
    const notADir = path.join(dir, "plain.jsonl");
    const summary = await runFile({
      input,
      output: path.join(dir, "plain.out.jsonl"),
      errors: path.join(dir, "plain.err.jsonl"),
      config: { ...config, batchDir: notADir },
      logger: pino({ level: "silent" }),
    });
    expect(summary).toMatchObject({ stopped: "done", completed: 1, cached: 0 });
  });
});
