// The checker must see what it is for: a lost line, a line twice, a line nobody asked for, counts and usage that
// disagree with the files. A checker that passes everything would make every chaos run green.
import { describe, expect, it } from "vitest";
import { checkBatch, checkRead } from "../../chaos/checker.js";

const line = (id: string, prompt = 3, completion = 2, cached = 0) => ({
  custom_id: id,
  response: {
    status_code: 200,
    body: { usage: { prompt_tokens: prompt, completion_tokens: completion, prompt_tokens_details: { cached_tokens: cached } } },
  },
});
const failed = (id: string) => ({ custom_id: id, response: null, error: { code: "batch_expired" } });
const batch = (
  completed: number,
  failedN: number,
  total: number,
  usage = { input_tokens: 9, output_tokens: 6, input_tokens_details: { cached_tokens: 1 } },
) => ({
  id: "b",
  status: "completed",
  request_counts: { completed, failed: failedN, total },
  usage,
});

describe("the chaos checker", () => {
  it("passes a batch whose files and counts agree", () => {
    const v = checkBatch(batch(3, 1, 4), ["a", "b", "c", "d"], [line("a"), line("b"), line("c", 3, 2, 1)], [failed("d")]);
    expect(v).toEqual({ batch: "b", lost: 0, duplicated: 0, mismatches: [] });
  });

  it("names a cached_lines that disagrees with the lines marked cached, whose whole prompt counts as cached", () => {
    const hit = { ...line("b", 3, 2, 0), cached: "hit" };
    const usage = { input_tokens: 6, output_tokens: 4, input_tokens_details: { cached_tokens: 3 } };
    expect(checkBatch({ ...batch(2, 0, 2, usage), cached_lines: 1 }, ["a", "b"], [line("a"), hit], []).mismatches).toEqual([]);
    expect(checkBatch({ ...batch(2, 0, 2, usage), cached_lines: 0 }, ["a", "b"], [line("a"), hit], []).mismatches).toEqual([
      "cached_lines 0 != 1 lines marked cached",
    ]);
  });

  it("counts lost, duplicated and unasked-for lines", () => {
    const v = checkBatch(batch(3, 0, 4), ["a", "b", "c", "d"], [line("a"), line("a"), line("x")], []);
    expect(v.lost).toBe(3);
    expect(v.duplicated).toBe(2);
  });

  it("names counts and usage that disagree with the files", () => {
    const v = checkBatch(
      batch(2, 2, 4, { input_tokens: 5, output_tokens: 4, input_tokens_details: { cached_tokens: 0 } }),
      ["a", "b", "c", "d"],
      [line("a"), line("b"), line("c")],
      [failed("d")],
    );
    expect(v.mismatches).toEqual([
      "completed 2 != 3 output lines",
      "failed 2 != 1 error lines",
      "usage.input_tokens 5 != 9",
      "usage.output_tokens 4 != 6",
    ]);
  });

  it("takes what a reader got while the batch ran only as the output file's start, line for line", () => {
    expect(checkRead(["a", "b"], ["a", "b", "c"])).toEqual([]);
    expect(checkRead(["a", "c"], ["a", "b", "c"])).toEqual(["line 2 read while it ran differs from the output file's"]);
    expect(checkRead(["a", "b", "c", "c"], ["a", "b", "c"])).toEqual([
      "read 4 output lines while it ran, the file has 3",
      "line 4 read while it ran differs from the output file's",
    ]);
  });
});
