// The runner's --plan as `npm run batch` runs it, on the generated model: the plan printed and nothing written or
// run, its prompt tokens against a real run's usage of the same file, and the flags of a run refused beside it.
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../config/config.js";
import { runFile } from "../../runner/run-file.js";
import { entryArgs } from "../../testkit/entry.js";
import { testModelPath } from "../../testkit/model.js";
import { repoRoot } from "../../testkit/repo-root.js";

const exec = promisify(execFile);
const engineEnv = { THREADS: "1", SEQUENCES: "4", CONTEXT_SIZE: "256", EMBEDDING_CONTEXTS: "1", LOG_LEVEL: "warn" };
let dir: string;
let modelPath: string;
beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "obi-runner-plan-"));
  modelPath = await testModelPath();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const chat = (id: string, content: string) =>
  JSON.stringify({
    custom_id: id,
    method: "POST",
    url: "/v1/chat/completions",
    body: {
      model: "m",
      messages: [
        { role: "system", content: "Answer in a word." },
        { role: "user", content },
      ],
      max_tokens: 6,
      temperature: 0,
    },
  });

const cli = (argv: string[]) =>
  exec(process.execPath, [...entryArgs("runner/main.ts"), ...argv], {
    cwd: repoRoot,
    env: { ...process.env, ...engineEnv, MODEL_PATH: modelPath },
  }).then(
    (r) => ({ code: 0, ...r }),
    (e) => ({ code: e.code as number, stdout: e.stdout as string, stderr: e.stderr as string }),
  );

describe("the runner's --plan", () => {
  it("prints the plan, writes and runs nothing, and counts the prompt tokens a run then reports", async () => {
    const input = path.join(dir, "in.jsonl");
    writeFileSync(
      input,
      `${["first question", "second one", "a third, longer question to count"].map((c, i) => chat(`r${i}`, c)).join("\n")}\n`,
    );
    const before = readdirSync(dir);
    const r = await cli(["--plan", input]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("Nothing was run.");
    const plan = JSON.parse(r.stdout.slice(r.stdout.indexOf("{")));
    expect(plan).toMatchObject({
      object: "batch.plan",
      lines: 3,
      distinct_requests: 3,
      cached_lines: 0,
      max_output_tokens: 18,
      tokenizer: "model",
    });
    expect(readdirSync(dir)).toEqual(before);

    const started = Date.now();
    const out = path.join(dir, "out.jsonl");
    const summary = await runFile({
      input,
      output: out,
      errors: path.join(dir, "errors.jsonl"),
      config: loadConfig({ ...engineEnv, MODEL_PATH: modelPath, BATCH_DIR: dir }),
      logger: pino({ level: "silent" }),
    });
    expect(summary.completed).toBe(3);
    expect(summary.usage.promptTokens).toBe(plan.input_tokens);
    console.log(
      `runner plan: ${plan.input_tokens} prompt tokens vs run ${summary.usage.promptTokens}; ` +
        `projected ${plan.projected_seconds} s at the default rate vs ${((Date.now() - started) / 1000).toFixed(1)} s run (model load included)`,
    );
  }, 180_000);

  it("projects at the rate the model's runs measured on this machine", async () => {
    const input = path.join(dir, "rated.jsonl");
    // Long answers, so the projected seconds are many and their ratio is the rates'.
    const line = (i: number) => {
      const request = JSON.parse(chat(`r${i}`, `question ${i}`));
      return JSON.stringify({ ...request, body: { ...request.body, max_tokens: 500 } });
    };
    writeFileSync(input, `${Array.from({ length: 10 }, (_, i) => line(i)).join("\n")}\n`);
    const batchDir = mkdtempSync(path.join(dir, "rated-"));
    const env = { ...process.env, ...engineEnv, MODEL_PATH: modelPath, BATCH_DIR: batchDir };
    const plan = async () => {
      const r = await exec(process.execPath, [...entryArgs("runner/main.ts"), "--plan", input], { cwd: repoRoot, env });
      return JSON.parse(r.stdout.slice(r.stdout.indexOf("{")));
    };
    const first = await plan();
    expect(first.throughput).toEqual({ work_per_second: 100, measured_batches: 0 });
    // Two runs of this model measured 30 and 50 work per second; one of another model and one too short are not its.
    const runs = [
      { work: 300, seconds: 10 },
      { work: 500, seconds: 10 },
      { work: 9999, seconds: 1 },
    ];
    writeFileSync(path.join(batchDir, "runner-rates.json"), JSON.stringify({ [first.model]: runs, other: [{ work: 1, seconds: 5 }] }));
    const second = await plan();
    expect(second.throughput).toEqual({ work_per_second: 40, measured_batches: 2 });
    expect(first.projected_seconds).toBeGreaterThan(40);
    expect(second.projected_seconds / first.projected_seconds).toBeCloseTo(2.5, 1);
  }, 180_000);

  it("refuses the flags of a run beside it, and an invalid file with its line errors", async () => {
    const input = path.join(dir, "plan-only.jsonl");
    writeFileSync(input, `${chat("a", "hi")}\n`);
    const withOutput = await cli(["--plan", input, "-o", path.join(dir, "x.jsonl")]);
    expect(withOutput.code).toBe(2);
    expect(withOutput.stderr).toContain("--output-file does not go with it");
    expect(existsSync(path.join(dir, "x.jsonl"))).toBe(false);

    const bad = path.join(dir, "bad.jsonl");
    writeFileSync(bad, `${chat("a", "hi")}\nnot json\n`);
    const refused = await cli(["--plan", bad]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("line 2: invalid_json_line");
    expect(refused.stderr).toContain("nothing was planned");
  }, 180_000);
});
