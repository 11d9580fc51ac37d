// The offline runner on a real model: local files, URL input and output on loopback, an invalid
// file, and the command line as `npm run batch` runs it.
import { execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type Config, loadConfig } from "../../config/config.js";
import { ensureGeneratedModel, writeGeneratedModel } from "../../engine/load/generated-model.js";
import { parseRunnerArgs, type RunnerArgs } from "../../runner/args.js";
import { type RunEvent, type RunSummary, runFile } from "../../runner/run-file.js";
import { runOffline, withArgs } from "../../runner/run-offline.js";
import { entryArgs } from "../../testkit/entry.js";
import { testModelPath } from "../../testkit/model.js";
import { repoRoot } from "../../testkit/repo-root.js";
import { type FileServer, startFileServer } from "../helpers/file-server.js";
import { startModelHost } from "../helpers/model-host.js";

const exec = promisify(execFile);
let dir: string;
let srv: FileServer;
let config: Config;
// Every line computes: the interruptions below land while lines generate, which answers remembered by an earlier run
// (the children's BATCH_DIR is the machine's) would not (the runner's cache: tests/runner/runner-cache.int.test.ts).
const engineEnv = { THREADS: "1", SEQUENCES: "4", CONTEXT_SIZE: "256", EMBEDDING_CONTEXTS: "1", RESULT_CACHE: "off" };

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "obi-runner-"));
  srv = await startFileServer();
  config = loadConfig({ MODEL_PATH: await testModelPath(), BATCH_DIR: dir, ...engineEnv });
});
afterAll(async () => {
  await srv.close();
  rmSync(dir, { recursive: true, force: true });
});

const chat = (id: string, content: string, extra: object = {}) =>
  JSON.stringify({
    custom_id: id,
    method: "POST",
    url: "/v1/chat/completions",
    body: { model: "m", messages: [{ role: "user", content }], max_tokens: 8, temperature: 0, ...extra },
  });

function args(input: string, output: string, more: string[] = []): RunnerArgs {
  const parsed = parseRunnerArgs(["-i", input, "-o", output, ...more]);
  if (parsed.kind !== "run") throw new Error(JSON.stringify(parsed));
  return parsed.args;
}

function sink() {
  let text = "";
  return { write: (t: string) => (text += t), text: () => text };
}

async function run(a: RunnerArgs, withConfig = config) {
  const stdout = sink();
  const stderr = sink();
  const result = await runOffline(a, {
    config: withConfig,
    logger: pino({ level: "silent" }),
    stdout,
    stderr,
    httpRetry: { attempts: 3, baseDelayMs: 5 },
  });
  return { ...result, stdout: stdout.text(), stderr: stderr.text() };
}

const rows = (text: string) =>
  text
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));

describe("offline runner", () => {
  it("honours request parameters per line and fails only the lines it cannot honour", async () => {
    const input = path.join(dir, "params.jsonl");
    const schema = { type: "object", properties: { mood: { enum: ["happy", "sad"] } }, required: ["mood"], additionalProperties: false };
    writeFileSync(
      input,
      `${[
        chat("json", "How is the cat?", { max_tokens: 60, response_format: { type: "json_schema", json_schema: { name: "m", schema } } }),
        chat("n", "Once upon a time", { n: 2, temperature: 1, seed: 3 }),
        chat("lp", "Once upon a time", { logprobs: true, top_logprobs: 1 }),
        chat("unknown", "x", { top_k: 40 }),
      ].join("\n")}\n`,
    );
    const out = path.join(dir, "params-out.jsonl");
    expect((await run(args(input, out))).exitCode).toBe(0);
    const ok = new Map(rows(readFileSync(out, "utf8")).map((x) => [x.custom_id, x.response.body]));
    expect(JSON.parse(ok.get("json").choices[0].message.content)).toEqual({ mood: expect.stringMatching(/^(happy|sad)$/) });
    expect(ok.get("n").choices).toHaveLength(2);
    expect(ok.get("lp").choices[0].logprobs.content[0].top_logprobs).toHaveLength(1);
    const [failed] = rows(readFileSync(path.join(dir, "params-out.errors.jsonl"), "utf8"));
    expect(failed).toMatchObject({
      custom_id: "unknown",
      response: { status_code: 400, body: { error: { code: "unknown_parameter", param: "top_k" } } },
    });
  });

  it("runs /v1/responses lines, tool calls included, on a model whose template has a tool format", async () => {
    const generated = loadConfig({ MODEL_PATH: await ensureGeneratedModel(), BATCH_DIR: dir, ...engineEnv, CONTEXT_SIZE: "1024" });
    const input = path.join(dir, "responses.jsonl");
    const schema = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"], additionalProperties: false };
    const line = (id: string, body: object) =>
      JSON.stringify({ custom_id: id, method: "POST", url: "/v1/responses", body: { model: "m", ...body } });
    writeFileSync(
      input,
      `${[
        line("json", { input: "Is it ok?", max_output_tokens: 40, text: { format: { type: "json_schema", name: "ok", schema } } }),
        line("call", { input: "Check", tools: [{ type: "function", name: "check", parameters: schema }], tool_choice: "required" }),
        line("bad", { input: "x", previous_response_id: "resp_1" }),
      ].join("\n")}\n`,
    );
    const out = path.join(dir, "responses-out.jsonl");
    expect((await run(args(input, out), generated)).exitCode).toBe(0);
    const ok = new Map(rows(readFileSync(out, "utf8")).map((x) => [x.custom_id, x.response.body]));
    expect(ok.get("json").object).toBe("response");
    expect(JSON.parse(ok.get("json").output[0].content[0].text)).toEqual({ ok: expect.any(Boolean) });
    const [call] = ok.get("call").output;
    expect(call).toMatchObject({ type: "function_call", name: "check" });
    expect(JSON.parse(call.arguments)).toEqual({ ok: expect.any(Boolean) });
    const [failed] = rows(readFileSync(path.join(dir, "responses-out.errors.jsonl"), "utf8"));
    expect(failed).toMatchObject({
      custom_id: "bad",
      response: { status_code: 400, body: { error: { code: "unsupported_parameter", param: "previous_response_id" } } },
    });
  });

  it("REPRODUCIBLE=true: a seeded line gives the same answer alone and among other lines", async () => {
    const strict = loadConfig({ MODEL_PATH: await testModelPath(), BATCH_DIR: dir, ...engineEnv, REPRODUCIBLE: "true" });
    const seeded = chat("seeded", "Tell me a story about a dog.", { temperature: 1.2, seed: 42, max_tokens: 32 });
    const others = Array.from({ length: 6 }, (_, i) =>
      chat(`other-${i}`, `A story about a cat, ${i}.`, { temperature: 1.2, seed: i, max_tokens: 32 }),
    );
    const answer = async (name: string, lines: string[]) => {
      const input = path.join(dir, `${name}.jsonl`);
      const out = path.join(dir, `${name}-out.jsonl`);
      writeFileSync(input, `${lines.join("\n")}\n`);
      expect((await run(args(input, out), strict)).exitCode).toBe(0);
      return rows(readFileSync(out, "utf8")).find((r) => r.custom_id === "seeded").response.body.choices[0].message.content;
    };
    const alone = await answer("alone", [seeded]);
    expect(await answer("crowd", [...others.slice(0, 3), seeded, ...others.slice(3)])).toBe(alone);
  });

  it("runs a local file: results in the output, a failed request in the error file", async () => {
    const input = path.join(dir, "in.jsonl");
    // ~2,000 tokens cannot fit a 256-token context: that request fails, the others go on.
    writeFileSync(
      input,
      `${[chat("a", "Once upon a time"), chat("b", "The cat"), chat("huge", "word ".repeat(2000)), chat("c", "A dog")].join("\n")}\n`,
    );
    const out = path.join(dir, "results", "out.jsonl");
    const r = await run(args(input, out));
    expect(r.exitCode).toBe(0);
    expect(r.summary).toMatchObject({ stopped: "done", endpoint: "/v1/chat/completions", total: 4, completed: 3, failed: 1 });
    const ok = rows(readFileSync(out, "utf8"));
    expect(ok.map((x) => x.custom_id).sort()).toEqual(["a", "b", "c"]);
    for (const x of ok) {
      expect(x.response.status_code).toBe(200);
      expect(x.response.body.choices[0].message.content.length).toBeGreaterThan(0);
    }
    const failed = rows(readFileSync(path.join(dir, "results", "out.errors.jsonl"), "utf8"));
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ custom_id: "huge", response: { status_code: 400 } });
    expect(r.stdout).toMatch(/4 requests \(\/v1\/chat\/completions\) in .*: 3 completed, 1 failed/);
    expect(r.stdout).toMatch(/errors: .*out\.errors\.jsonl/);
    expect(r.stderr).toMatch(/progress: 4\/4 \(100%\)/);

    // Another file's results are never mixed in: without --overwrite the run refuses, with it they are replaced.
    writeFileSync(input, `${chat("only", "Hello")}\n`);
    const refused = await run(args(input, out));
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toMatch(/holds results for requests that are not in .*: pass --overwrite/);
    expect((await run(args(input, out, ["--overwrite"]))).exitCode).toBe(0);
    expect(rows(readFileSync(out, "utf8")).map((x) => x.custom_id)).toEqual(["only"]);
    expect(existsSync(path.join(dir, "results", "out.errors.jsonl"))).toBe(false);
  });

  it("continues an interrupted run: what the output holds is skipped, a torn last line is cut", async () => {
    const input = path.join(dir, "resume.jsonl");
    const lines = Array.from({ length: 6 }, (_, i) => chat(`r${i}`, `Story ${i}`));
    writeFileSync(input, `${lines.join("\n")}\n`);
    const out = path.join(dir, "resume-out.jsonl");
    // As an interrupted run leaves it: two whole results and a line torn by the interruption.
    expect((await run(args(input, out))).exitCode).toBe(0);
    const whole = readFileSync(out, "utf8").trim().split("\n");
    const kept = whole.filter((l) => ["r1", "r4"].includes(JSON.parse(l).custom_id));
    writeFileSync(out, `${kept.join("\n")}\n${whole[0].slice(0, 40)}`);

    const again = await run(args(input, out));
    expect(again.exitCode).toBe(0);
    expect(again.stderr).toMatch(/continuing: 2 requests already in the output/);
    expect(again.stdout).toMatch(/6 requests \(2 from the earlier run\)/);
    // The rates are this run's four requests, and the bar's last line and the summary say the same.
    const bar = /6\/6 \(100%\) ([\d.]+) req\/s (\d+) tok\/s done/.exec(again.stderr)!;
    expect(again.stdout).toContain(`this run: 4 requests in `);
    expect(again.stdout).toContain(`, ${bar[1]} req/s, ${bar[2]} tok/s)`);
    const ids = rows(readFileSync(out, "utf8")).map((x) => x.custom_id);
    // In the order the earlier run wrote them, which is the order of finishing, not of the file.
    expect(ids.slice(0, 2)).toEqual(kept.map((l) => JSON.parse(l).custom_id));
    expect([...ids].sort()).toEqual(["r0", "r1", "r2", "r3", "r4", "r5"]);
    // Kept results are byte for byte the earlier ones.
    expect(readFileSync(out, "utf8").startsWith(`${kept.join("\n")}\n`)).toBe(true);
  });

  it("--retry-failed runs only the error file's requests again, keeping every success byte for byte", async () => {
    const input = path.join(dir, "retry.jsonl");
    writeFileSync(input, `${[chat("a", "Once upon a time"), chat("big", "word ".repeat(2000)), chat("b", "The cat")].join("\n")}\n`);
    const out = path.join(dir, "retry-out.jsonl");
    const errors = path.join(dir, "retry-out.errors.jsonl");
    expect((await run(args(input, out))).exitCode).toBe(0);
    const before = readFileSync(out, "utf8");
    expect(rows(readFileSync(errors, "utf8")).map((x) => x.custom_id)).toEqual(["big"]);

    const again = await run(args(input, out, ["--retry-failed"]));
    expect(again.exitCode).toBe(0);
    expect(again.stderr).toMatch(
      /retrying the failed requests of .*retry-out\.errors\.jsonl \(kept as retry-out\.errors\.jsonl\.retried\)/,
    );
    // One request ran: the two in the output were skipped, and kept as they were.
    expect(again.stdout).toMatch(/3 requests \(2 from the earlier run\)/);
    expect(readFileSync(out, "utf8").startsWith(before)).toBe(true);
    expect(rows(readFileSync(`${errors}.retried`, "utf8")).map((x) => x.custom_id)).toEqual(["big"]);
    // Still too long for the context: it fails again, once, in a fresh error file.
    expect(rows(readFileSync(errors, "utf8")).map((x) => x.custom_id)).toEqual(["big"]);

    // Run again as it stands: every request has a result (the failure in the error file), so nothing runs and no
    // model is loaded.
    const again2 = await run(args(input, out));
    expect(again2.exitCode).toBe(0);
    expect(again2.stdout).toMatch(/^nothing to run: all 3 requests of .* already have a result \(2 completed, 1 failed\)/);
    expect(again2.summary).toMatchObject({ stopped: "nothing_to_run", total: 3, completed: 2, failed: 1 });

    rmSync(errors);
    const none = await run(args(input, out, ["--retry-failed"]));
    expect(none.exitCode).toBe(0);
    expect(none.stderr).toMatch(/nothing to retry: .*does not exist/);
    expect(parseRunnerArgs(["-i", input, "-o", out, "--retry-failed", "--overwrite"])).toMatchObject({ kind: "usage" });
    expect(parseRunnerArgs(["-i", input, "-o", "http://127.0.0.1:1/o.jsonl", "--retry-failed"])).toMatchObject({
      kind: "usage",
      message: "--retry-failed needs a local output and error file",
    });
  });

  it("reads the input from a URL and PUTs the output to one, retrying a 503 each way", async () => {
    srv.objects.set(
      "/in/batch.jsonl",
      Buffer.from([chat("u1", "Once"), chat("u2", "The sun"), chat("big", "word ".repeat(2000))].join("\n")),
    );
    srv.failNext(1);
    const r = await run(args(`${srv.baseUrl}/in/batch.jsonl`, `${srv.baseUrl}/out/results.jsonl?sig=s3cr3t`));
    expect(r.exitCode).toBe(0);
    expect(
      rows(srv.objects.get("/out/results.jsonl")!.toString())
        .map((x) => x.custom_id)
        .sort(),
    ).toEqual(["u1", "u2"]);
    expect(rows(srv.objects.get("/out/results.errors.jsonl")!.toString()).map((x) => x.custom_id)).toEqual(["big"]);
    expect(srv.requests.some((q) => q.method === "PUT" && q.url === "/out/results.errors.jsonl?sig=s3cr3t")).toBe(true);
    // The signature never reaches the terminal.
    expect(r.stdout + r.stderr).not.toContain("s3cr3t");
    expect(r.stdout).toMatch(/output: http:\/\/127\.0\.0\.1:\d+\/out\/results\.jsonl\?…/);
  });

  it("runFile, the library, runs a file and returns its summary and events, printing nothing", async () => {
    const input = path.join(dir, "library.jsonl");
    writeFileSync(input, `${[chat("a", "Once upon a time"), chat("b", "The cat"), chat("huge", "word ".repeat(2000))].join("\n")}\n`);
    const output = path.join(dir, "library-out.jsonl");
    const printed: string[] = [];
    const capture = (chunk: unknown) => {
      printed.push(String(chunk));
      return true;
    };
    const out = vi.spyOn(process.stdout, "write").mockImplementation(capture);
    const err = vi.spyOn(process.stderr, "write").mockImplementation(capture);
    const events: RunEvent[] = [];
    let summary: RunSummary;
    try {
      summary = await runFile({
        input,
        output,
        errors: `${output}.errors`,
        config,
        endpoint: "/v1/chat/completions",
        onEvent: (e) => events.push(e),
      });
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
    expect(printed).toEqual([]);
    expect(summary).toMatchObject({ stopped: "done", endpoint: "/v1/chat/completions", total: 3, completed: 2, failed: 1, earlier: null });
    expect(summary).toMatchObject({ output, errors: `${output}.errors` });
    expect(summary.usage.completionTokens).toBeGreaterThan(0);
    expect(
      rows(readFileSync(output, "utf8"))
        .map((x) => x.custom_id)
        .sort(),
    ).toEqual(["a", "b"]);
    expect(events.map((e) => e.type).filter((t) => t !== "progress")).toEqual(["running", "ran"]);
    expect(events.find((e) => e.type === "running")).toMatchObject({ total: 3, endpoint: "/v1/chat/completions", earlier: null });
  });

  it("runs embeddings files, taking the endpoint from the lines", async () => {
    const input = path.join(dir, "emb.jsonl");
    const line = (id: string, text: string) =>
      JSON.stringify({ custom_id: id, method: "POST", url: "/v1/embeddings", body: { model: "m", input: text } });
    writeFileSync(input, [line("e1", "hello"), line("e2", "world")].join("\n"));
    const out = path.join(dir, "emb-out.jsonl");
    const r = await run(args(input, out));
    expect(r.summary?.endpoint).toBe("/v1/embeddings");
    const got = rows(readFileSync(out, "utf8"));
    expect(got).toHaveLength(2);
    expect(got[0].response.body.data[0].embedding.length).toBeGreaterThan(0);
  });

  it("runs nothing and exits 2 for an invalid file, listing the bad lines", async () => {
    const input = path.join(dir, "bad.jsonl");
    writeFileSync(
      input,
      [
        chat("x", "hi"),
        "{not json",
        chat("x", "dup"),
        JSON.stringify({ custom_id: "y", method: "POST", url: "/v1/completions", body: {} }),
      ].join("\n"),
    );
    const out = path.join(dir, "never.jsonl");
    const r = await run(args(input, out));
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toMatch(/is not a valid batch file \(3 problems\); nothing was run/);
    expect(r.stderr).toMatch(/line 2: invalid_json_line/);
    expect(r.stderr).toMatch(/line 3: duplicate_custom_id/);
    expect(r.stderr).toMatch(/line 4: mismatched_url/);
    expect(existsSync(out)).toBe(false);
  });

  it("fails clearly on a missing input file or an unreachable URL", async () => {
    await expect(run(args(path.join(dir, "nope.jsonl"), path.join(dir, "o.jsonl")))).rejects.toThrow(/no such input file: .*nope\.jsonl/);
    await expect(run(args(`${srv.baseUrl}/missing.jsonl`, path.join(dir, "o.jsonl")))).rejects.toThrow(
      /GET .*missing\.jsonl failed: HTTP 404/,
    );
  });
});

describe("npm run batch (the command line)", () => {
  const cli = (argv: string[], env: Record<string, string> = {}) =>
    exec(process.execPath, [...entryArgs("runner/main.ts"), ...argv], {
      cwd: repoRoot,
      env: { ...process.env, ...engineEnv, ...env },
    }).then(
      (r) => ({ code: 0, ...r }),
      (e) => ({ code: e.code as number, stdout: e.stdout as string, stderr: e.stderr as string }),
    );

  it("prints help and refuses bad flags, an invalid file and a missing one with 2, as docs/runner.md says", async () => {
    const help = await cli(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/-i, --input-file/);
    expect((await cli(["-i", "x.jsonl"])).code).toBe(2);
    const bad = path.join(dir, "cli-bad.jsonl");
    writeFileSync(bad, "nope\n");
    const r = await cli(["-i", bad, "-o", path.join(dir, "cli-bad-out.jsonl")]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/line 1: invalid_json_line/);
    // The help says what the runner does.
    const said = help.stdout.replace(/\s+/g, " ");
    expect(said).toContain(`an invalid file runs nothing and exits ${r.code} with the line numbers`);
    expect(said).toMatch(
      new RegExp(`; ${r.code} for input the runner cannot take, [^;]*bad flags or settings, a missing or invalid input file`),
    );
    const missing = await cli(["-i", path.join(dir, "cli-nope.jsonl"), "-o", path.join(dir, "cli-nope-out.jsonl")]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^error: no such input file: .*cli-nope\.jsonl$/m);
  });

  it("Ctrl-C leaves a consistent output and the summary; running again continues where it stopped", async () => {
    const input = path.join(dir, "ctrl-c.jsonl");
    const body = (i: number) => ({ model: "m", prompt: `Once upon a time ${i}`, max_tokens: 120, temperature: 0 });
    writeFileSync(
      input,
      `${Array.from({ length: 40 }, (_, i) => JSON.stringify({ custom_id: `k${i}`, method: "POST", url: "/v1/completions", body: body(i) })).join("\n")}\n`,
    );
    const out = path.join(dir, "ctrl-c-out.jsonl");
    const child = spawn(process.execPath, ["--import", "tsx", path.join(repoRoot, "runner/main.ts"), "-i", input, "-o", out], {
      cwd: repoRoot,
      env: { ...process.env, ...engineEnv, MODEL_PATH: config.modelPath, SEQUENCES: "2" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    // Interrupted as soon as it starts running: before, or just after, its first results.
    while (!/running 40 requests/.test(stderr) && child.exitCode === null) await new Promise((r) => setTimeout(r, 5));
    child.kill("SIGINT");
    expect(await exited).toBe(130);
    const m = /interrupted after (\d+) requests .*: (\d+) completed, 0 failed/.exec(stdout);
    expect(m, stdout).not.toBeNull();
    const resume = `node --import ${import.meta.resolve("tsx")} ${path.join(repoRoot, "runner/main.ts")} -i ${input} -o ${out}`;
    expect(stdout).toContain(`resume with: ${resume}`);
    const text = existsSync(out) ? readFileSync(out, "utf8") : "";
    const written = text.trim() === "" ? [] : rows(text);
    expect(written).toHaveLength(Number(m![2]));
    expect(Number(m![2])).toBeLessThan(40);

    // The printed command resumes, run as printed (before, it lacked --import tsx and failed on the .ts extension).
    const again = await exec("sh", ["-c", resume], { cwd: dir, env: { ...process.env, ...engineEnv, MODEL_PATH: config.modelPath } }).then(
      (r) => ({ code: 0, ...r }),
      (e) => ({ code: e.code as number, stdout: e.stdout as string, stderr: e.stderr as string }),
    );
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(
      written.length > 0 ? new RegExp(`40 requests \\(${written.length} from the earlier run\\)`) : /40 requests/,
    );
    const ids = rows(readFileSync(out, "utf8")).map((x) => x.custom_id);
    expect(new Set(ids).size).toBe(40);
    expect(ids).toHaveLength(40);
  });

  /** The runner as `npm run batch` starts it, its output kept; `exited` resolves with its exit code. */
  const spawnCli = (argv: string[], env: Record<string, string>, opts: { detached?: boolean } = {}) => {
    const child = spawn(process.execPath, [...entryArgs("runner/main.ts"), ...argv], {
      cwd: repoRoot,
      env: { ...process.env, ...engineEnv, ...env },
      stdio: ["ignore", "pipe", "pipe"],
      detached: opts.detached ?? false,
    });
    const out = { stdout: "", stderr: "" };
    child.stdout.on("data", (d) => (out.stdout += d));
    child.stderr.on("data", (d) => (out.stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    return { child, out, exited };
  };

  it("Ctrl-C lets the requests being computed finish whole, begins none of those waiting, and the resume runs the rest", async () => {
    // Two sequences, four requests in flight (twice the sequences), in file order: k0 is short, so when its result
    // lands k1 is generating (400 tokens, an ordinary token all but forced), k2 has k0's sequence, k3 and k4 wait.
    const input = path.join(dir, "drain.jsonl");
    const line = (i: number) =>
      JSON.stringify({
        custom_id: `k${i}`,
        method: "POST",
        url: "/v1/completions",
        body: { model: "m", prompt: `Once upon a time ${i}`, max_tokens: i === 0 ? 4 : 400, temperature: 0, logit_bias: { "300": 100 } },
      });
    writeFileSync(input, `${Array.from({ length: 24 }, (_, i) => line(i)).join("\n")}\n`);
    const out = path.join(dir, "drain-out.jsonl");
    const env = { MODEL_PATH: config.modelPath, SEQUENCES: "2", CONTEXTS: "1", CONTEXT_SIZE: "512", BATCH_ORDER: "file" };
    const run = spawnCli(["-i", input, "-o", out], env);
    const landed = () => (existsSync(out) ? readFileSync(out, "utf8").split("\n").filter(Boolean).length : 0);
    while (landed() === 0 && run.child.exitCode === null) await new Promise((r) => setTimeout(r, 2));
    const atSignal = landed();
    run.child.kill("SIGINT");
    expect(await run.exited, run.out.stderr).toBe(130);
    const written = rows(readFileSync(out, "utf8"));
    const ids = written.map((r) => r.custom_id);
    // k1 was generating when the signal came: it finished (it used to be cut and dropped), as a whole answer.
    expect(ids).toContain("k1");
    for (const r of written) expect(r.response.body.usage.completion_tokens).toBe(r.custom_id === "k0" ? 4 : 400);
    // Only what was computing at the signal finished: at most one per sequence beyond what had landed.
    expect(written.length).toBeLessThanOrEqual(atSignal + 2);
    expect(run.out.stdout).toMatch(new RegExp(`interrupted after ${written.length} requests .*: ${written.length} completed, 0 failed`));
    expect(run.out.stderr).not.toMatch(/\n\s+at /);

    const again = await cli(["-i", input, "-o", out], env);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(new RegExp(`24 requests \\(${written.length} from the earlier run\\)`));
    const all = rows(readFileSync(out, "utf8")).map((x) => x.custom_id);
    expect(new Set(all).size).toBe(24);
    expect(all).toHaveLength(24);
  });

  it("Ctrl-C while the model loads, to the whole process group as a terminal sends it: the load stops, exit 130, no file written", async () => {
    // A 66 MB model: its load takes long enough to be interrupted.
    const model = await ensureGeneratedModel({ preset: "small" });
    const input = path.join(dir, "load-stop.jsonl");
    writeFileSync(input, `${chat("a", "Once upon a time")}\n${chat("b", "Hello")}\n`);
    const out = path.join(dir, "load-stop-out.jsonl");
    // Its own process group, as a terminal's foreground job is: the signal reaches every process in it, node-llama-cpp's
    // test of its binary (which runs as the load begins) included.
    const run = spawnCli(["-i", input, "-o", out], { MODEL_PATH: model, GPU: "auto" }, { detached: true });
    while (!/loading model/.test(run.out.stderr) && run.child.exitCode === null) await new Promise((r) => setTimeout(r, 2));
    process.kill(-run.child.pid!, "SIGINT");
    expect(await run.exited, run.out.stderr).toBe(130);
    expect(run.out.stderr).not.toMatch(/running 2 requests/);
    expect(run.out.stderr).not.toMatch(/\n\s+at |ModelLoadError|prebuilt binary|Binding binary test failed|falling back/);
    expect(run.out.stderr).not.toMatch(/once the requests being computed finish/);
    expect(run.out.stdout).toMatch(/^interrupted after 0 requests \(\/v1\/chat\/completions\) in .*: 0 completed, 0 failed$/m);
    // Nothing was written, and the summary names no file.
    expect(existsSync(out)).toBe(false);
    expect(run.out.stdout).toMatch(/^output: none$/m);
    expect(run.out.stdout).toContain(
      `resume with: node ${entryArgs("runner/main.ts")
        .map((a) => (a === "tsx" ? import.meta.resolve("tsx") : a))
        .join(" ")} -i ${input} -o ${out}`,
    );
  });

  it("a model that cannot load leaves no output file, and a --model problem names --model", async () => {
    const input = path.join(dir, "bad-model.jsonl");
    writeFileSync(input, `${chat("a", "Hello")}\n`);
    const out = path.join(dir, "bad-model-out.jsonl");
    const empty = path.join(dir, "empty.gguf");
    writeFileSync(empty, "");
    const broken = await cli(["-i", input, "-o", out, "--model", empty]);
    // A fault while it runs, as --help says: 1.
    expect(broken.code, broken.stderr).toBe(1);
    expect(broken.stderr).toMatch(/GGUF/);
    expect(broken.stderr).not.toMatch(/MODEL_PATH/);
    expect(existsSync(out)).toBe(false);

    const missing = await cli(["-i", input, "-o", out, "--model", "Qwen/Qwen2.5-0.5B-Instruct-GGUF"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(
      /^error: --model \/.*Qwen\/Qwen2\.5-0\.5B-Instruct-GGUF: no such file; .*write hf:Qwen\/Qwen2\.5-0\.5B-Instruct-GGUF/m,
    );
    expect(missing.stderr).not.toMatch(/MODEL_PATH/);
    expect(existsSync(out)).toBe(false);
  });

  it("runs the example file, and warns loudly when no model is given", async () => {
    const out = path.join(dir, "cli-out.jsonl");
    const r = await cli(["-i", path.join(repoRoot, "examples/sample_batch.jsonl"), "-o", out], { MODEL_PATH: "" });
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/WARNING: MODEL_PATH is not set: .*RANDOM weights.*--model/);
    expect(r.stderr).toMatch(/progress: 4\/4 \(100%\)/);
    expect(r.stdout).toMatch(/4 requests .*: 4 completed, 0 failed/);
    expect(rows(readFileSync(out, "utf8"))).toHaveLength(4);
  });

  it("downloads --model hf:... once into MODELS_DIR with its progress on stderr; Ctrl-C during the download exits 130", async () => {
    const tiny = path.join(dir, "host-tiny.gguf");
    await writeGeneratedModel(tiny, { preset: "tiny" });
    const host = await startModelHost();
    try {
      host.put("/Owner/Tiny-GGUF/resolve/main/tiny-q8_0.gguf", readFileSync(tiny));
      host.manifest("Owner", "Tiny-GGUF", "Q8_0", "tiny-q8_0.gguf");
      const modelsDir = path.join(dir, "runner-models");
      const env = { MODEL_PATH: "", MODELS_DIR: modelsDir, HF_ENDPOINT: host.url };
      const input = path.join(repoRoot, "examples/sample_batch.jsonl");

      host.stallAfter(300_000);
      const child = spawn(
        process.execPath,
        [...entryArgs("runner/main.ts"), "-i", input, "-o", path.join(dir, "dl-0.jsonl"), "--model", "hf:Owner/Tiny-GGUF:Q8_0"],
        {
          cwd: repoRoot,
          env: { ...process.env, ...engineEnv, ...env },
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      let stderr = "";
      child.stderr.on("data", (d) => (stderr += d));
      const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
      while (!/downloading hf:Owner\/Tiny-GGUF:Q8_0 \[/.test(stderr) && child.exitCode === null)
        await new Promise((r) => setTimeout(r, 20));
      child.kill("SIGINT");
      expect(await exited, stderr).toBe(130);
      expect(readdirSync(modelsDir).filter((f) => f.endsWith(".gguf"))).toEqual([]);
      host.stallAfter(undefined);

      const first = await cli(["-i", input, "-o", path.join(dir, "dl-1.jsonl"), "--model", "hf:Owner/Tiny-GGUF:Q8_0"], env);
      expect(first.code, first.stderr).toBe(0);
      expect(first.stderr).toMatch(/downloading hf:Owner\/Tiny-GGUF:Q8_0 \[#{20}\] 100% 1\.\d MB of 1\.\d MB/);
      expect(first.stdout).toMatch(/4 requests .*: 4 completed, 0 failed/);
      const before = host.requests.length;
      const second = await cli(["-i", input, "-o", path.join(dir, "dl-2.jsonl"), "--model", "hf:Owner/Tiny-GGUF:Q8_0"], env);
      expect(second.code, second.stderr).toBe(0);
      expect(second.stderr).not.toMatch(/downloading/);
      expect(host.requests.length).toBe(before);
    } finally {
      await host.close();
    }
  });

  it("routes by the lines' model with --models-file, and refuses a model the file does not serve", async () => {
    const models = path.join(dir, "models.yaml");
    writeFileSync(
      models,
      `models:\n  - { name: tiny, aliases: [m], local: { path: ${await testModelPath()}, sequences: 2, context_size: 256 } }\n`,
    );
    const input = path.join(dir, "routed.jsonl");
    writeFileSync(input, `${chat("a", "Once upon a time")}\n`);
    const out = path.join(dir, "routed-out.jsonl");
    const a = args(input, out, ["--models-file", models]);
    const ok = await run(a, withArgs(config, a));
    expect(ok.exitCode).toBe(0);
    expect(rows(readFileSync(out, "utf8"))[0].response.body.model).toBe("tiny");

    writeFileSync(input, `${chat("a", "Once upon a time").replace('"model":"m"', '"model":"gpt-4o"')}\n`);
    const refused = await run(a, withArgs(config, a));
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toMatch(/the model 'gpt-4o' is not in the models file; it serves tiny, m/);
    expect(parseRunnerArgs(["-i", input, "-o", out, "--model", "x.gguf", "--models-file", models])).toMatchObject({ kind: "usage" });
  });

  it("states what the run cost at the models file's price: per hour of the --pool given, or per million tokens", async () => {
    const models = path.join(dir, "priced.yaml");
    const local = `local: { path: ${await testModelPath()}, sequences: 2, context_size: 256 }`;
    writeFileSync(
      models,
      [
        "models:",
        `  - { name: hourly, ${local}, price: { spot_per_hour: 3.6, dedicated_per_hour: 36 } }`,
        `  - { name: tokens, ${local}, price: { currency: EUR, input_per_million: 1000000, cached_input_per_million: 1000000, output_per_million: 2000000 } }`,
      ].join("\n"),
    );
    const input = path.join(dir, "priced.jsonl");
    const out = path.join(dir, "priced-out.jsonl");
    const costOf = (stdout: string) => {
      const m = /^cost: ([0-9.]+) (\w+) \((.*)\)$/m.exec(stdout);
      expect(m, stdout).not.toBeNull();
      return { amount: Number(m![1]), currency: m![2], basis: m![3] };
    };
    writeFileSync(input, `${chat("a", "Once upon a time").replace('"model":"m"', '"model":"hourly"')}\n`);
    const spot = args(input, out, ["--models-file", models, "--pool", "spot", "--overwrite"]);
    const hourly = await run(spot, withArgs(config, spot));
    const c = costOf(hourly.stdout);
    const seconds = Number(/([0-9.]+) s of a spot slot at 3.6 USD\/hour/.exec(c.basis)?.[1]);
    expect(c.currency).toBe("USD");
    expect(c.amount).toBeCloseTo(seconds / 1000, 3);

    writeFileSync(input, `${chat("a", "Once upon a time").replace('"model":"m"', '"model":"tokens"')}\n`);
    const t = args(input, out, ["--models-file", models, "--overwrite"]);
    const tokens = await run(t, withArgs(config, t));
    const u = rows(readFileSync(out, "utf8"))[0].response.body.usage;
    // A price of 1 EUR per input token and 2 per output token: the cost is the token counts.
    expect(costOf(tokens.stdout)).toMatchObject({ currency: "EUR", amount: u.prompt_tokens + 2 * u.completion_tokens });
    expect(parseRunnerArgs(["-i", input, "-o", out, "--pool", "cheap"])).toMatchObject({ kind: "usage" });
  });
});
