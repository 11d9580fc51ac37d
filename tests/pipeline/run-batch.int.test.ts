// runBatchFile on the real engine: output and error files, cancel, shutdown and resume, retries.
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LlamaBackend } from "../../engine/adapter/openai-backend.js";
import type { Engine } from "../../engine/types.js";
import type { InferenceBackend } from "../../openai/backend.js";
import { repairTornTail, scanDone } from "../../pipeline/resume.js";
import { runBatchFile } from "../../pipeline/run-batch.js";
import type { AbortReason, Endpoint, RunBatchOptions } from "../../pipeline/types.js";
import { jsonl, scratchDir } from "../helpers/scratch.js";
import { observe, testEngine } from "../helpers/test-engine.js";

const scratch = scratchDir("run-batch");
let engine: Engine;
beforeAll(async () => {
  engine = await testEngine();
});
afterAll(async () => {
  await engine?.close();
});

const completionLine = (i: number, prompt = `Once upon a time, story ${i}`) => ({
  custom_id: `request-${i}`,
  method: "POST",
  url: "/v1/completions",
  body: { model: "stories", prompt, max_tokens: 4, temperature: 0 },
});

async function readLines(path: string): Promise<any[]> {
  const text = await readFile(path, "utf8").catch(() => "");
  return text
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

async function files(lines: unknown[]) {
  return {
    inputPath: await scratch.write(jsonl(lines), "input.jsonl"),
    outputPath: await scratch.file("output.jsonl"),
    errorPath: await scratch.file("errors.jsonl"),
  };
}

const run = (f: Awaited<ReturnType<typeof files>>, extra: Partial<RunBatchOptions> = {}) =>
  runBatchFile({
    ...f,
    endpoint: "/v1/completions" as Endpoint,
    backend: new LlamaBackend(engine),
    batchSize: 4,
    concurrency: 4,
    ...extra,
  });

/**
 * The backend, with the custom_ids of the lines that began on it (took a sequence), and of those that began only
 * after `drain` (a completions line's prompt names its story).
 */
function begins(backend: InferenceBackend, drain: AbortSignal) {
  const begun = new Set<string>();
  const afterDrain: string[] = [];
  const wrapped: InferenceBackend = Object.create(backend);
  wrapped.execute = (request, signal, options) => {
    const id = `request-${String((request.body as { prompt?: unknown }).prompt).split("story ")[1]}`;
    return backend.execute(request, signal, {
      ...options,
      onBegin: () => {
        if (!begun.has(id) && drain.aborted) afterDrain.push(id);
        begun.add(id);
        options?.onBegin?.();
      },
    });
  };
  return { backend: wrapped, begun, afterDrain };
}

function expectEachIdOnce(outputs: any[], errors: any[], total: number) {
  const ids = [...outputs, ...errors].map((l) => l.custom_id);
  expect(new Set(ids).size).toBe(ids.length);
  expect(ids.length).toBe(total);
}

describe("runBatchFile", () => {
  it("a 20-line completions file produces 20 OpenAI output lines", async () => {
    const f = await files(Array.from({ length: 20 }, (_, i) => completionLine(i)));
    const progress: number[] = [];
    const r = await run(f, { onProgress: (p) => progress.push(p.completed) });
    expect(r).toMatchObject({ completed: 20, failed: 0 });
    expect(r.aborted).toBeUndefined();
    expect(progress.at(-1)).toBe(20);

    const out = await readLines(f.outputPath);
    expect(out).toHaveLength(20);
    expectEachIdOnce(out, [], 20);
    for (const line of out) {
      expect(line).toEqual({
        id: expect.stringMatching(/^batch_req_[0-9a-f]+$/),
        custom_id: expect.stringMatching(/^request-\d+$/),
        response: {
          status_code: 200,
          request_id: expect.stringMatching(/^req_[0-9a-f]+$/),
          // The model that served the line, not the name the line asked for.
          body: expect.objectContaining({ object: "text_completion", model: engine.info.modelId }),
        },
        error: null,
      });
    }
    const usage = out.reduce((s, l) => s + l.response.body.usage.prompt_tokens, 0);
    expect(r.usage.promptTokens).toBe(usage);
    expect(r.usage.completionTokens).toBe(out.reduce((s, l) => s + l.response.body.usage.completion_tokens, 0));
    // No failures: no error file at all.
    await expect(readFile(f.errorPath)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("an overlong prompt gets a 400 error line and the rest succeed", async () => {
    const lines = Array.from({ length: 6 }, (_, i) => completionLine(i));
    lines[2] = completionLine(2, "Once upon a time there was a big dog. ".repeat(200));
    const f = await files(lines);
    const r = await run(f);
    expect(r).toMatchObject({ completed: 5, failed: 1 });
    const [err] = await readLines(f.errorPath);
    expect(err).toEqual({
      id: expect.stringMatching(/^batch_req_/),
      custom_id: "request-2",
      response: {
        status_code: 400,
        request_id: expect.stringMatching(/^req_/),
        body: { error: { message: expect.any(String), type: "invalid_request_error", param: "prompt", code: "context_length_exceeded" } },
      },
      error: null,
    });
    expectEachIdOnce(await readLines(f.outputPath), [err], 6);
  });

  it("cancel mid-run accounts for every request: done ones in the output, the rest batch_cancelled", async () => {
    const f = await files(Array.from({ length: 30 }, (_, i) => completionLine(i)));
    const ac = new AbortController();
    const reason: AbortReason = { code: "batch_cancelled", message: "The batch was cancelled." };
    const r = await run(f, { concurrency: 2, batchSize: 3, signal: ac.signal, onProgress: (p) => p.completed >= 2 && ac.abort(reason) });
    expect(r.aborted).toEqual(reason);
    expect(r.completed + r.failed).toBe(30);
    expect(r.completed).toBeGreaterThanOrEqual(2);
    expect(r.completed).toBeLessThan(30);
    const out = await readLines(f.outputPath);
    const errs = await readLines(f.errorPath);
    expect(out).toHaveLength(r.completed);
    expect(errs).toHaveLength(r.failed);
    for (const e of errs)
      expect(e).toEqual({
        id: expect.stringMatching(/^batch_req_/),
        custom_id: expect.any(String),
        response: null,
        error: { code: "batch_cancelled", message: reason.message },
      });
    expectEachIdOnce(out, errs, 30);
  });

  it("after a shutdown, a resumed run completes the batch without rerunning done requests", async () => {
    const f = await files(Array.from({ length: 16 }, (_, i) => completionLine(i)));
    const first = observe(engine);
    const ac = new AbortController();
    const r1 = await run(f, {
      backend: new LlamaBackend(first),
      concurrency: 2,
      batchSize: 2,
      signal: ac.signal,
      onProgress: (p) => p.completed >= 3 && ac.abort({ code: "shutdown", message: "restart" }),
    });
    expect(r1.aborted?.code).toBe("shutdown");
    expect(r1.completed).toBeLessThan(16);
    // A shutdown writes nothing for what did not run.
    await expect(readFile(f.errorPath)).rejects.toMatchObject({ code: "ENOENT" });

    // Simulate a crash that tore the last line, then resume.
    const { appendFile } = await import("node:fs/promises");
    await appendFile(f.outputPath, '{"id":"batch_req_torn","custom_id":"request-15","resp');
    expect(await repairTornTail(f.outputPath)).toBeGreaterThan(0);
    const scan = await scanDone(f.outputPath, f.errorPath);
    expect(scan.completed).toBe(r1.completed);
    const second = observe(engine);
    const r2 = await run(f, { backend: new LlamaBackend(second), done: scan.done, base: scan });
    expect(r2).toMatchObject({ completed: 16, failed: 0 });
    expect(r2.usage.promptTokens).toBeGreaterThan(scan.usage.promptTokens);
    expect(second.calls).toHaveLength(16 - r1.completed);
    const out = await readLines(f.outputPath);
    expectEachIdOnce(out, [], 16);
    for (const done of scan.done) expect(second.calls).not.toContain(`Once upon a time, story ${done.slice("request-".length)}`);
  });

  it("a drain lets the requests in flight finish and be written, then stops like a shutdown", async () => {
    const f = await files(Array.from({ length: 24 }, (_, i) => completionLine(i)));
    const drain = new AbortController();
    const seen = begins(new LlamaBackend(engine), drain.signal);
    const r = await run(f, {
      backend: seen.backend,
      concurrency: 4,
      batchSize: 4,
      drain: drain.signal,
      onProgress: (p) => p.completed >= 3 && drain.abort(),
    });
    expect(r.aborted?.code).toBe("shutdown");
    expect(r.completed).toBeLessThan(24);
    // Every request that began on the engine finished and has its line: nothing generating was thrown away.
    const out = await readLines(f.outputPath);
    expect(out.map((l) => l.custom_id).sort()).toEqual([...seen.begun].sort());
    expect(out).toHaveLength(r.completed);
    await expect(readFile(f.errorPath)).rejects.toMatchObject({ code: "ENOENT" });
    const scan = await scanDone(f.outputPath, f.errorPath);
    const r2 = await run(f, { done: scan.done, base: scan });
    expect(r2).toMatchObject({ completed: 24, failed: 0 });
    expectEachIdOnce(await readLines(f.outputPath), [], 24);
  });

  it("a drain lets only the lines holding a sequence finish: those waiting for one go back unrun, and run once on resume", async () => {
    const f = await files(Array.from({ length: 40 }, (_, i) => completionLine(i, `Once upon a time, story ${i}`)));
    const drain = new AbortController();
    const seen = begins(new LlamaBackend(engine), drain.signal);
    // Four times the engine's sequences in flight: most of them wait for one when the drain comes.
    const r = await run(f, {
      backend: seen.backend,
      concurrency: 16,
      batchSize: 16,
      drain: drain.signal,
      onProgress: (p) => p.completed >= 1 && drain.abort(),
    });
    expect(r.aborted?.code).toBe("shutdown");
    // Nothing began after the drain, and everything that had begun finished and was written.
    expect(seen.afterDrain).toEqual([]);
    const out = await readLines(f.outputPath);
    expect(out.map((l) => l.custom_id).sort()).toEqual([...seen.begun].sort());
    expect(r.completed).toBeLessThan(16);
    await expect(readFile(f.errorPath)).rejects.toMatchObject({ code: "ENOENT" });
    const scan = await scanDone(f.outputPath, f.errorPath);
    const again = begins(new LlamaBackend(engine), new AbortController().signal);
    const r2 = await run(f, { backend: again.backend, done: scan.done, base: scan, concurrency: 16, batchSize: 16 });
    expect(r2).toMatchObject({ completed: 40, failed: 0 });
    expect(again.begun.size).toBe(40 - r.completed);
    expectEachIdOnce(await readLines(f.outputPath), [], 40);
  });

  it("a cancel's drain ends the lines still waiting for a sequence as cancelled, unrun", async () => {
    const f = await files(Array.from({ length: 40 }, (_, i) => completionLine(i, `Once upon a time, story ${i}`)));
    const drain = new AbortController();
    const seen = begins(new LlamaBackend(engine), drain.signal);
    const reason: AbortReason = { code: "batch_cancelled", message: "The batch was cancelled before this request ran." };
    const r = await run(f, {
      backend: seen.backend,
      concurrency: 16,
      batchSize: 16,
      drain: drain.signal,
      onProgress: (p) => p.completed >= 1 && drain.abort(reason),
    });
    expect(r.aborted).toEqual(reason);
    expect(seen.afterDrain).toEqual([]);
    const out = await readLines(f.outputPath);
    const errs = await readLines(f.errorPath);
    expect(out.map((l) => l.custom_id).sort()).toEqual([...seen.begun].sort());
    expect(errs.length).toBe(40 - out.length);
    for (const e of errs) expect(e.error).toEqual({ code: "batch_cancelled", message: reason.message });
    expectEachIdOnce(out, errs, 40);
  });

  it("a drain lets only the requests computing finish; those waiting for a sequence end with its reason", async () => {
    const sequences = engine.info.sequences;
    const f = await files(Array.from({ length: 8 * sequences }, (_, i) => completionLine(i)));
    const observed = observe(engine);
    const drain = new AbortController();
    const cancelled: AbortReason = { code: "batch_cancelled", message: "The batch was cancelled." };
    const r = await run(f, {
      backend: new LlamaBackend(observed),
      // Twice the sequences and more in flight: some always wait for one.
      concurrency: 2 * sequences + 2,
      batchSize: 4,
      drain: drain.signal,
      onProgress: (p) => p.completed >= 3 && drain.abort(cancelled),
    });
    expect(r.aborted?.code).toBe("batch_cancelled");
    const out = await readLines(f.outputPath);
    const errs = await readLines(f.errorPath);
    expectEachIdOnce(out, errs, 8 * sequences);
    expect(out).toHaveLength(r.completed);
    for (const l of out) expect(l.response.body.usage.completion_tokens).toBe(4);
    // Some reached the engine and gave their wait up: they have the cancel's line, not an answer.
    expect(observed.calls.length).toBeGreaterThan(r.completed);
    for (const l of errs) expect(l.error).toEqual({ code: "batch_cancelled", message: "The batch was cancelled." });
  });

  it("retries transient engine errors, and reports a 500 line when they persist", async () => {
    const f = await files([completionLine(0)]);
    const flaky = observe(engine);
    flaky.failNext(2);
    expect(await run(f, { backend: new LlamaBackend(flaky), retry: { attempts: 2, baseDelayMs: 5 } })).toMatchObject({
      completed: 1,
      failed: 0,
    });

    const g = await files([completionLine(1)]);
    flaky.failNext(3);
    expect(await run(g, { backend: new LlamaBackend(flaky), retry: { attempts: 2, baseDelayMs: 5 } })).toMatchObject({
      completed: 0,
      failed: 1,
    });
    const [err] = await readLines(g.errorPath);
    expect(err.response).toMatchObject({ status_code: 500, body: { error: { type: "server_error", code: "engine_busy" } } });
  });

  it("runs chat and embeddings files", async () => {
    const chat = await files(
      [0, 1, 2].map((i) => ({
        custom_id: `c${i}`,
        method: "POST",
        url: "/v1/chat/completions",
        body: { messages: [{ role: "user", content: `Hi ${i}` }], max_tokens: 3 },
      })),
    );
    expect(await run(chat, { endpoint: "/v1/chat/completions" })).toMatchObject({ completed: 3, failed: 0 });
    expect((await readLines(chat.outputPath)).map((l) => l.response.body.object)).toEqual([
      "chat.completion",
      "chat.completion",
      "chat.completion",
    ]);

    const emb = await files(
      [0, 1].map((i) => ({ custom_id: `e${i}`, method: "POST", url: "/v1/embeddings", body: { input: [`text ${i}`, "more"] } })),
    );
    const r = await run(emb, { endpoint: "/v1/embeddings" });
    expect(r).toMatchObject({ completed: 2, failed: 0, usage: { completionTokens: 0 } });
    const out = await readLines(emb.outputPath);
    expect(out.map((l) => [l.response.body.object, l.response.body.data.length])).toEqual([
      ["list", 2],
      ["list", 2],
    ]);
  });

  it("a line that is not a request becomes an error line instead of stopping the run", async () => {
    const inputPath = await scratch.write(`${jsonl([completionLine(0)])}{oops\n${jsonl([{ ...completionLine(1), body: { prompt: 7 } }])}`);
    const f = { inputPath, outputPath: await scratch.file(), errorPath: await scratch.file() };
    expect(await run(f)).toMatchObject({ completed: 1, failed: 2 });
    const errs = await readLines(f.errorPath);
    expect(errs.map((e) => [e.custom_id, e.response.status_code])).toEqual(
      expect.arrayContaining([
        [null, 400],
        ["request-1", 400],
      ]),
    );
  });
});
