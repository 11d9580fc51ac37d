// The order a batch's lines start in (pipeline/schedule.ts): longest first, prefix families together, file order
// on ties; read back from the file by byte range; and the run itself, which starts lines in that order.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LlamaBackend } from "../../engine/adapter/openai-backend.js";
import type { Engine } from "../../engine/types.js";
import { runBatchFile } from "../../pipeline/run-batch.js";
import { costClass, estimateLine, OrderPlanner, plannedLines, prefixHash } from "../../pipeline/schedule.js";
import { jsonl, scratchDir } from "../helpers/scratch.js";
import { observe, testEngine } from "../helpers/test-engine.js";

const scratch = scratchDir("schedule");

describe("estimateLine", () => {
  it("weighs the token limit (any of its three names, times n) far above the prompt's length", () => {
    const prompt = "x".repeat(400); // ~100 tokens, weighed 1/8
    expect(estimateLine("/v1/completions", { prompt, max_tokens: 100 }).cost).toBeCloseTo(112.5);
    expect(estimateLine("/v1/chat/completions", { messages: [], max_completion_tokens: 40, n: 3 }).cost).toBeGreaterThanOrEqual(120);
    expect(estimateLine("/v1/responses", { input: "hi", max_output_tokens: 7 }).cost).toBeLessThan(8);
    // A completions list generates for each of its prompts.
    expect(estimateLine("/v1/completions", { prompt: ["a", "b", "c"], max_tokens: 100, n: 2 }).cost).toBeGreaterThanOrEqual(600);
  });

  it("assumes OpenAI's default of 16 for completions, a long answer for chat without a limit, none for embeddings", () => {
    expect(estimateLine("/v1/completions", { prompt: "" }).cost).toBe(16);
    expect(estimateLine("/v1/chat/completions", { messages: [{ role: "user", content: "hi" }] }).cost).toBeGreaterThan(500);
    expect(estimateLine("/v1/embeddings", { input: "x".repeat(32) }).cost).toBe(1);
  });

  it("reads the prompt as the model does: tools and instructions before the messages", () => {
    const a = estimateLine("/v1/chat/completions", { tools: [{ type: "function" }], messages: [{ role: "user", content: "q" }] });
    expect(a.prefixText.startsWith('[{"type":"function"}]')).toBe(true);
    // Whatever the body holds, an estimate never throws: the line's own check fails it later.
    expect(() => estimateLine("/v1/completions", null)).not.toThrow();
    expect(() => estimateLine("/v1/completions", { prompt: 5, max_tokens: "many" })).not.toThrow();
  });
});

describe("OrderPlanner", () => {
  const plan = (lines: Array<{ text: string; cost: number }>) => {
    const planner = new OrderPlanner();
    for (const [i, l] of lines.entries()) planner.add({ lineNo: i + 1, start: i, end: i, estimate: { cost: l.cost, prefixText: l.text } });
    const p = planner.plan();
    return Array.from(p.order, (i) => p.lineNo(i));
  };

  it("starts the costliest class first, and keeps file order among equals", () => {
    expect(
      plan([
        { text: "a", cost: 16 },
        { text: "b", cost: 500 },
        { text: "c", cost: 16 },
        { text: "d", cost: 64 },
      ]),
    ).toEqual([2, 4, 1, 3]);
  });

  it("within a cost class, lines sharing an opening sit together, and longest first inside the family", () => {
    const doc = (d: number) => `Document ${d}: ${"words ".repeat(60)}`;
    const lines = [0, 1, 2, 0, 1, 2, 0, 1, 2].map((d, i) => ({ text: `${doc(d)} question ${i}`, cost: 20 + i }));
    const order = plan(lines);
    const families = order.map((n) => lines[n - 1].text.slice(0, 11));
    // Three runs of three, whatever order the families take.
    expect(new Set([families.slice(0, 3), families.slice(3, 6), families.slice(6, 9)].map((f) => new Set(f).size))).toEqual(new Set([1]));
    for (const run of [order.slice(0, 3), order.slice(3, 6), order.slice(6, 9)]) expect(run).toEqual([...run].sort((a, b) => b - a));
  });

  it("nests families: a longer shared opening groups inside a shorter one", () => {
    const system = "S".repeat(100);
    const lines = [
      { text: `${system}${"A".repeat(300)}1`, cost: 20 },
      { text: `${system}${"B".repeat(300)}1`, cost: 20 },
      { text: `${system}${"A".repeat(300)}2`, cost: 20 },
      { text: `${system}${"B".repeat(300)}2`, cost: 20 },
    ];
    const order = plan(lines);
    expect([order.slice(0, 2).sort(), order.slice(2).sort()].sort()).toEqual([
      [1, 3],
      [2, 4],
    ]);
  });

  it("puts lines with nothing to estimate (not JSON) in the cheapest class", () => {
    const planner = new OrderPlanner();
    planner.add({ lineNo: 1, start: 0, end: 1 });
    planner.add({ lineNo: 2, start: 2, end: 3, estimate: { cost: 16, prefixText: "p" } });
    const p = planner.plan();
    expect(Array.from(p.order, (i) => p.lineNo(i))).toEqual([2, 1]);
  });

  const interleaved = (lines: Array<{ text: string; cost: number }>, lanes?: number) => {
    const planner = new OrderPlanner();
    for (const [i, l] of lines.entries()) planner.add({ lineNo: i + 1, start: i, end: i, estimate: { cost: l.cost, prefixText: l.text } });
    const p = planner.plan("interleave", lanes);
    return Array.from(p.order, (i) => p.lineNo(i));
  };
  const familyOf = (lines: Array<{ text: string }>, n: number) => lines[n - 1].text.slice(0, 3);

  it("interleaves: families take turns, one line each, whatever their cost, in file order within a family", () => {
    const lines = ["A", "A", "A", "B", "B", "C"].map((f, i) => ({ text: `${f.repeat(300)} ${i}`, cost: 16 * (i + 1) }));
    const order = interleaved(lines);
    expect(order.map((n) => familyOf(lines, n))).toEqual(["AAA", "BBB", "CCC", "AAA", "BBB", "AAA"]);
    expect(order.filter((n) => familyOf(lines, n) === "AAA")).toEqual([1, 2, 3]);
  });

  it("interleaves over lanes: families are dealt to as many lanes as slots, and a lane runs its families one after another", () => {
    // Four families of 3 lines over 2 lanes: each lane holds two families back to back, and the lanes alternate.
    const lines = ["A", "B", "C", "D"].flatMap((f) => [0, 1, 2].map((i) => ({ text: `${f.repeat(300)} ${i}`, cost: 16 })));
    const order = interleaved(lines, 2).map((n) => familyOf(lines, n));
    const lane0 = order.filter((_, i) => i % 2 === 0);
    const lane1 = order.filter((_, i) => i % 2 === 1);
    for (const lane of [lane0, lane1]) {
      expect(new Set(lane).size).toBe(2);
      // One family's three lines, then the other's.
      expect(lane.slice(0, 3).every((f) => f === lane[0]) && lane.slice(3).every((f) => f === lane[3])).toBe(true);
    }
    expect(new Set([...lane0, ...lane1]).size).toBe(4);
  });

  it("interleaves: lines that share no opening start costliest first, as in the cost order", () => {
    const lines = [16, 500, 64, 300].map((cost, i) => ({ text: `${i} ${"w".repeat(300)}`, cost }));
    expect(interleaved(lines, 2)).toEqual([2, 4, 3, 1]);
  });

  it("interleaves: lines too short to share 64 characters are each a family of their own; the largest family starts", () => {
    const lines = [
      { text: "x", cost: 16 },
      { text: "y", cost: 16 },
      { text: `${"Z".repeat(80)}1`, cost: 16 },
      { text: `${"Z".repeat(80)}2`, cost: 16 },
    ];
    expect(interleaved(lines)).toEqual([3, 1, 2, 4]);
  });

  it("classes are a factor of two apart and hashes look only at the opening asked for", () => {
    expect([costClass(0), costClass(1), costClass(15.9), costClass(16), costClass(31), costClass(32)]).toEqual([0, 0, 3, 4, 4, 5]);
    expect(prefixHash(`${"a".repeat(64)}x`, 64)).toBe(prefixHash(`${"a".repeat(64)}y`, 64));
    expect(prefixHash(`${"a".repeat(64)}x`, 65)).not.toBe(prefixHash(`${"a".repeat(64)}y`, 65));
    expect(prefixHash("short", 64)).toBe(0);
  });
});

describe("plannedLines", () => {
  it("reads each line back exactly by its byte range (BOM, CRLF, multi-byte text), skipping blank and done lines", async () => {
    const line = (id: string, max_tokens: number, prompt = "é ü 😀") => JSON.stringify({ custom_id: id, body: { prompt, max_tokens } });
    const text = `\uFEFF${line("a", 16)}\r\n\n${line("b", 400)}\r\nnot json\n${line("done", 900)}\n${line("c", 64)}`;
    const path = await scratch.write(text, "planned.jsonl");
    const got: Array<{ lineNo: number; text: string }> = [];
    for await (const l of plannedLines(path, "/v1/completions", (v) => (v as { custom_id?: string }).custom_id !== "done")) got.push(l);
    expect(got.map((l) => l.lineNo)).toEqual([3, 6, 1, 4]);
    expect(got.map((l) => l.text)).toEqual([line("b", 400), line("c", 64), line("a", 16), "not json"]);
  });

  it("leaves out the lines skip names by number, before reading them (a line that is not JSON too)", async () => {
    const line = (id: string, max_tokens: number) => JSON.stringify({ custom_id: id, body: { prompt: "p", max_tokens } });
    const path = await scratch.write(`${line("a", 16)}\nnot json\n${line("b", 400)}\n${line("c", 64)}\n`, "skipped.jsonl");
    const shapes: unknown[] = [];
    const got: number[] = [];
    const skip = (n: number) => n === 2 || n === 3;
    for await (const l of plannedLines(path, "/v1/completions", () => true, { skip, onShape: async (s) => void shapes.push(s) }))
      got.push(l.lineNo);
    expect(got).toEqual([4, 1]);
    expect(shapes).toEqual([{ lines: 2, familyLines: 0 }]);
  });

  it("reads a file too large to hold again (over 32 MiB) line by line at its offsets, alike", async () => {
    const line = (id: string, max_tokens: number, prompt = "é ü 😀") => JSON.stringify({ custom_id: id, body: { prompt, max_tokens } });
    const big = line("big", 1, "x".repeat(33 << 20));
    const path = await scratch.write(`\uFEFF${line("a", 16)}\r\n${big}\n${line("b", 400)}\r\n\n${line("c", 64)}`, "large.jsonl");
    const got: Array<{ lineNo: number; text: string }> = [];
    for await (const l of plannedLines(path, "/v1/completions", () => true)) got.push(l);
    // The long prompt weighs most.
    expect(got.map((l) => l.lineNo)).toEqual([2, 3, 5, 1]);
    expect(got.map((l) => l.text)).toEqual([big, line("b", 400), line("c", 64), line("a", 16)]);
  });
});

describe("a run's shape", () => {
  it("counts the lines whose first 64 characters another line opens with too", async () => {
    const preamble = "You label support tickets. Answer with one word: billing, bug or other. ";
    const body = (prompt: string) => ({ prompt, max_tokens: 4 });
    const lines = [
      ...[1, 2, 3].map((i) => ({ custom_id: `f${i}`, body: body(`${preamble}Ticket ${i}`) })),
      { custom_id: "short-a", body: body("Hi") },
      { custom_id: "short-b", body: body("Hi") },
      { custom_id: "alone", body: body(`${"Something else entirely, long enough to hash at 64 characters. ".repeat(2)}`) },
      { custom_id: "done", body: body(`${preamble}Ticket 9`) },
    ];
    const path = await scratch.write(jsonl(lines), "shape.jsonl");
    const shapes: unknown[] = [];
    const got: number[] = [];
    const source = plannedLines(path, "/v1/completions", (v) => (v as { custom_id?: string }).custom_id !== "done", {
      preference: { order: "cost" },
      onShape: async (shape) => {
        // The first line waits for this to resolve.
        expect(got).toEqual([]);
        shapes.push(shape);
      },
    });
    for await (const l of source) got.push(l.lineNo);
    // Lines too short to hash do not count as a family, and done lines are not part of the run.
    expect(shapes).toEqual([{ lines: 6, familyLines: 3 }]);
    expect(got).toHaveLength(6);
  });
});

describe("runBatchFile's start order", () => {
  let engine: Engine;
  beforeAll(async () => {
    engine = await testEngine();
  });
  afterAll(async () => {
    await engine?.close();
  });

  const lines = [4, 1, 12, 2, 8].map((max_tokens, i) => ({
    custom_id: `r${i}`,
    method: "POST",
    url: "/v1/completions",
    body: { prompt: `Once upon a time ${i}`, max_tokens, temperature: 0 },
  }));

  for (const [order, expected] of [
    ["cost", ["Once upon a time 2", "Once upon a time 4", "Once upon a time 0", "Once upon a time 3", "Once upon a time 1"]],
    ["file", lines.map((l) => l.body.prompt)],
  ] as const) {
    it(`${order}: requests start in that order and every line is answered once`, async () => {
      const observed = observe(engine);
      const result = await runBatchFile({
        inputPath: await scratch.write(jsonl(lines), `${order}.jsonl`),
        outputPath: await scratch.file(`${order}-out.jsonl`),
        errorPath: await scratch.file(`${order}-err.jsonl`),
        endpoint: "/v1/completions",
        backend: new LlamaBackend(observed),
        batchSize: 2,
        concurrency: 1,
        order,
      });
      expect(observed.calls).toEqual(expected);
      expect(result.completed).toBe(5);
    });
  }
});
