import { spawn } from "node:child_process";
import { readFile, stat } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { repairTornTail, scanDone, scanResultText } from "../../pipeline/resume.js";
import { jsonl, scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("resume");

const ok = (id: string, prompt: number, completion: number, cached = 0) => ({
  id: `batch_req_${id}`,
  custom_id: id,
  response: {
    status_code: 200,
    request_id: "req_1",
    body: { usage: { prompt_tokens: prompt, completion_tokens: completion, prompt_tokens_details: { cached_tokens: cached } } },
  },
  error: null,
});
const failed = (id: string) => ({
  id: `batch_req_${id}`,
  custom_id: id,
  response: { status_code: 400, request_id: "req_2", body: { error: { message: "x" } } },
  error: null,
});

describe("scanDone", () => {
  it("collects done ids, counts and usage from both files, skipping a torn last line", async () => {
    const out = await scratch.write(`${jsonl([ok("a", 3, 4, 1), ok("b", 5, 6)])}{"custom_id":"c","resp`);
    const err = await scratch.write(
      jsonl([failed("d"), { id: "x", custom_id: "e", response: null, error: { code: "batch_expired", message: "m" } }]),
    );
    const s = await scanDone(out, err);
    expect([...s.done].sort()).toEqual(["a", "b", "d", "e"]);
    expect(s).toMatchObject({ completed: 2, failed: 2, usage: { promptTokens: 8, completionTokens: 10, cachedTokens: 1 } });
  });

  it("counts result lines held in memory (a checkpoint's part) the same way", async () => {
    const output = `${jsonl([ok("a", 3, 4, 1), ok("b", 5, 6)])}`;
    const errors = jsonl([failed("d")]);
    const fromText = await scanResultText(output, errors);
    expect(fromText).toEqual(await scanDone(await scratch.write(output), await scratch.write(errors)));
    expect(fromText).toMatchObject({ completed: 2, failed: 1, usage: { promptTokens: 8, completionTokens: 10, cachedTokens: 1 } });
    expect(await scanResultText("", "")).toMatchObject({ completed: 0, failed: 0 });
  });

  it("reads missing files as empty", async () => {
    const s = await scanDone(await scratch.file(), await scratch.file());
    expect(s).toEqual({
      done: new Set(),
      completed: 0,
      failed: 0,
      usage: { promptTokens: 0, completionTokens: 0, cachedTokens: 0 },
      cached: { lines: 0, outputTokens: 0 },
    });
  });
});

describe("repairTornTail", () => {
  it("cuts a torn last line back to the last newline", async () => {
    const p = await scratch.write('{"a":1}\n{"b":2}\n{"c":');
    expect(await repairTornTail(p)).toBe(5);
    expect(await readFile(p, "utf8")).toBe('{"a":1}\n{"b":2}\n');
  });

  it("leaves a whole file alone, empties a file with no newline, and is safe on a missing file", async () => {
    const whole = await scratch.write('{"a":1}\n');
    expect(await repairTornTail(whole)).toBe(0);
    expect(await readFile(whole, "utf8")).toBe('{"a":1}\n');
    const noNewline = await scratch.write('{"a"');
    expect(await repairTornTail(noNewline)).toBe(4);
    expect((await stat(noNewline)).size).toBe(0);
    expect(await repairTornTail(await scratch.file())).toBe(0);
    expect(await repairTornTail(await scratch.write(""))).toBe(0);
  });

  it("finds the last newline far back in a long torn line", async () => {
    const p = await scratch.write(`keep\n${"z".repeat(200_000)}`);
    expect(await repairTornTail(p)).toBe(200_000);
    expect(await readFile(p, "utf8")).toBe("keep\n");
  });

  it("after kill -9 of a process appending lines, the repaired file is whole JSON lines", async () => {
    const p = await scratch.file("killed.jsonl");
    const writer = fileURLToPath(new URL("./append-forever.ts", import.meta.url));
    const child = spawn(process.execPath, ["--import", "tsx", writer, p], { stdio: ["ignore", "pipe", "inherit"] });
    // The child says when it has written some lines; then it dies mid-stream.
    await new Promise<void>((resolve, reject) => {
      child.stdout.once("data", () => resolve());
      child.once("exit", (code) => reject(new Error(`writer exited early with ${code}`)));
    });
    // Lines wait in the stream's buffer (up to a MiB) until written: killed once more than a hundred are in the file.
    while ((await stat(p)).size < 101 * 3020) await new Promise((r) => setTimeout(r, 5));
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    await repairTornTail(p);
    const lines = (await readFile(p, "utf8")).split("\n");
    expect(lines.pop()).toBe("");
    expect(lines.length).toBeGreaterThan(100);
    for (const [i, l] of lines.entries()) expect(JSON.parse(l)).toMatchObject({ i });
  });
});
