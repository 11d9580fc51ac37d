import { describe, expect, it } from "vitest";
import { brokenRule, minimumSample, stopRulesOf } from "../../domain/stop-rules.js";

const figures = (total: number, completed: number, failed: number, outputTokens = 0) => ({
  request_counts: { total, completed, failed },
  usage: { output_tokens: outputTokens },
});

describe("stop rules", () => {
  it("reads string limits from metadata, over the key's defaults", () => {
    expect(stopRulesOf({ max_error_rate: "0.2", team: "x" }, { maxErrorRate: 0.5, maxCost: 3 })).toEqual({ maxErrorRate: 0.2, maxCost: 3 });
    expect(stopRulesOf({ max_output_tokens: "1e3", max_cost: ".5" })).toEqual({ maxOutputTokens: 1000, maxCost: 0.5 });
    expect(stopRulesOf(null)).toEqual({});
    for (const [k, v] of [
      ["max_error_rate", "0"],
      ["max_error_rate", "20%"],
      ["max_cost", "Infinity"],
      ["max_output_tokens", "0x10"],
      ["max_output_tokens", " "],
    ])
      expect(() => stopRulesOf({ [k]: v })).toThrow(expect.objectContaining({ param: `metadata.${k}`, code: "invalid_metadata" }));
  });

  it("judges the error rate only past the minimum sample: 20 lines or 5% of the batch", () => {
    expect(minimumSample(200)).toBe(20);
    expect(minimumSample(10_000)).toBe(500);
    const rules = { maxErrorRate: 0.2 };
    expect(brokenRule(rules, figures(200, 0, 19), null)).toBeUndefined();
    expect(brokenRule(rules, figures(200, 154, 46), null)).toEqual({
      rule: "max_error_rate",
      message: "stopped: 46 of 200 lines failed (23%), over max_error_rate 20%",
    });
    // Exactly at the rate is not over it.
    expect(brokenRule(rules, figures(200, 80, 20), null)).toBeUndefined();
    expect(brokenRule(rules, figures(10_000, 0, 499), null)).toBeUndefined();
    // A batch smaller than the sample is judged once every line has ended.
    expect(brokenRule(rules, figures(5, 2, 3), null)?.rule).toBe("max_error_rate");
  });

  it("names the cost and the output tokens with their figures", () => {
    expect(brokenRule({ maxCost: 1 }, figures(10, 5, 0), { amount: 1.25, currency: "USD" })?.message).toBe(
      "stopped: the batch cost 1.25 USD, over max_cost 1 USD",
    );
    expect(brokenRule({ maxCost: 1 }, figures(10, 5, 0), null)).toBeUndefined();
    expect(brokenRule({ maxOutputTokens: 10_000 }, figures(10, 5, 0, 10_240), null)?.message ?? "").toBe(
      "stopped: 10,240 output tokens, over max_output_tokens 10,000",
    );
  });
});
