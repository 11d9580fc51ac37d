// runFile as a library: it returns a typed summary and throws typed errors, and writes nothing to stdout or stderr
// (no model here: a models file names an upstream that is never called, and each case stops before one would run).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { type Config, loadConfig } from "../../config/config.js";
import { InputError, InvalidFileError, ModelNotServedError, type RunEvent, runFile } from "../../runner/run-file.js";

let dir: string;
let config: Config;
let printed: string[];

beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "obi-run-file-"));
  const models = path.join(dir, "models.yaml");
  writeFileSync(models, "models:\n  - name: m\n    upstream: { base_urls: ['http://127.0.0.1:9/v1'], model: m }\n");
  config = loadConfig({ MODELS_FILE: models, BATCH_DIR: dir });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
beforeEach(() => {
  printed = [];
  const capture = (chunk: unknown) => {
    printed.push(String(chunk));
    return true;
  };
  vi.spyOn(process.stdout, "write").mockImplementation(capture);
  vi.spyOn(process.stderr, "write").mockImplementation(capture);
});
afterEach(() => {
  vi.restoreAllMocks();
  expect(printed).toEqual([]);
});

const line = (id: string, url = "/v1/chat/completions", model = "m") =>
  JSON.stringify({ custom_id: id, method: "POST", url, body: { model, messages: [{ role: "user", content: "hi" }] } });
const result = (id: string, ok: boolean) =>
  JSON.stringify({
    id: `batch_req_${id}`,
    custom_id: id,
    response: { status_code: ok ? 200 : 400, request_id: id, body: ok ? { usage: { prompt_tokens: 3, completion_tokens: 5 } } : {} },
    error: null,
  });

function files(name: string, lines: string[]) {
  const input = path.join(dir, `${name}.jsonl`);
  writeFileSync(input, `${lines.join("\n")}\n`);
  return { input, output: path.join(dir, `${name}-out.jsonl`), errors: path.join(dir, `${name}-out.errors.jsonl`) };
}

describe("runFile", () => {
  it("returns the summary of a file whose every request has a result, loading no model and printing nothing", async () => {
    const f = files("done", [line("a"), line("b"), line("c")]);
    writeFileSync(f.output, `${result("a", true)}\n${result("b", true)}\n`);
    writeFileSync(f.errors, `${result("c", false)}\n`);
    const events: RunEvent[] = [];
    const summary = await runFile({ ...f, config, onEvent: (e) => events.push(e) });
    expect(summary).toMatchObject({
      stopped: "nothing_to_run",
      endpoint: "/v1/chat/completions",
      model: "m",
      total: 3,
      completed: 2,
      failed: 1,
      earlier: { requests: 3, completed: 2, failed: 1 },
      output: f.output,
      errors: f.errors,
    });
    expect(summary.usage.completionTokens).toBe(10);
    expect(events).toEqual([{ type: "continuing", requests: 3, retryFailed: false }]);
  });

  it("makes no folder of its own for local files, so a run killed leaves nothing in TMPDIR (here one that is not there)", async () => {
    const before = process.env.TMPDIR;
    process.env.TMPDIR = path.join(dir, "no-such-folder");
    try {
      const f = files("local", [line("a")]);
      writeFileSync(f.output, `${result("a", true)}\n`);
      expect(await runFile({ ...f, config })).toMatchObject({ stopped: "nothing_to_run" });
    } finally {
      if (before === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = before;
    }
  });

  it("says there is nothing to retry where no error file exists", async () => {
    const f = files("retry", [line("a")]);
    expect(await runFile({ ...f, config, retryFailed: true })).toMatchObject({
      stopped: "nothing_to_retry",
      total: 1,
      output: null,
      errors: null,
    });
  });

  it("holds the lines to the endpoint the caller knows, and to the caller's limit on their count", async () => {
    const f = files("endpoint", [line("a", "/v1/embeddings"), line("b", "/v1/embeddings")]);
    const invalid = await runFile({ ...f, config, endpoint: "/v1/chat/completions" }).catch((e) => e);
    expect(invalid).toBeInstanceOf(InvalidFileError);
    expect(invalid.reason).toBe("invalid_file");
    expect(invalid.validation.errors.map((e: { code: string }) => e.code)).toEqual(["mismatched_url", "mismatched_url"]);
    const tooMany = await runFile({ ...files("many", [line("a"), line("b")]), config, maxRequests: 1 }).catch((e) => e);
    expect(tooMany).toBeInstanceOf(InvalidFileError);
  });

  it("throws typed errors for input it cannot take: a missing file, another file's results, a model not served", async () => {
    const missing = await runFile({ ...files("x", []), input: path.join(dir, "nope.jsonl"), config }).catch((e) => e);
    expect(missing).toBeInstanceOf(InputError);
    expect(missing).toMatchObject({ reason: "no_input", message: expect.stringMatching(/no such input file: .*nope\.jsonl/) });

    const f = files("foreign", [line("a")]);
    writeFileSync(f.output, `${result("other", true)}\n`);
    expect(await runFile({ ...f, config }).catch((e) => e)).toMatchObject({ reason: "foreign_results" });
    expect(
      await runFile({
        ...f,
        config,
        overwrite: true,
        endpoint: "/v1/chat/completions",
        input: files("n", [line("a", undefined, "z")]).input,
      }).catch((e) => e),
    ).toBeInstanceOf(ModelNotServedError);
  });

  it("returns an interrupted summary where it is aborted before anything runs", async () => {
    const f = files("abort", [line("a")]);
    const stop = new AbortController();
    stop.abort();
    expect(await runFile({ ...f, config, signal: stop.signal })).toMatchObject({
      stopped: "interrupted",
      total: 1,
      completed: 0,
      aborted: { code: "shutdown" },
    });
  });
});
