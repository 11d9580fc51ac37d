import { describe, expect, it } from "vitest";
import { brokenRule, minimumSample, stopRulesOf } from "../../domain/stop-rules.js";

const figures = (total: number, completed: number, failed: number, outputTokens = 0) => ({
  request_counts: { total, completed, failed },
  usage: { output_tokens: outputTokens },
});

/** A sample of `ended` lines of a batch's run and ended, `failed` of them failed, none refused. */
const ran = (ended: number, failed: number) => ({ lines: 10_000, early: 0, refused: 0, begun: ended, ended, failed });

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
    expect(brokenRule(rules, figures(200, 0, 19), null, ran(19, 19))).toBeUndefined();
    expect(brokenRule(rules, figures(200, 154, 46), null, ran(200, 46))).toEqual({
      rule: "max_error_rate",
      message: "stopped: 46 of 200 lines failed (23%), over max_error_rate 20%",
    });
    // Exactly at the rate is not over it.
    expect(brokenRule(rules, figures(200, 80, 20), null, ran(100, 20))).toBeUndefined();
    expect(brokenRule(rules, figures(10_000, 0, 499), null, ran(499, 499))).toBeUndefined();
    // A batch smaller than the sample is judged once every line has ended.
    expect(brokenRule(rules, figures(5, 2, 3), null, ran(5, 3))?.rule).toBe("max_error_rate");
    // Without a sample of its lines, no rate is judged.
    expect(brokenRule(rules, figures(200, 0, 200), null)).toBeUndefined();
  });

  it("counts the refusals that come first among all the lines, and judges the rest on lines looked at as they run", () => {
    const rules = { maxErrorRate: 0.2 };
    const sample = (early: number, refused: number, begun: number, ended: number, failed: number) => ({
      lines: 200,
      early,
      refused,
      begun,
      ended,
      failed,
    });
    // 200 lines, every 8th too long for the context (the costliest, so first): all 25 refused before a line ended.
    expect(brokenRule(rules, figures(200, 0, 25), null, sample(25, 0, 29, 0, 0))).toBeUndefined();
    expect(brokenRule(rules, figures(200, 40, 25), null, sample(25, 0, 60, 40, 0))).toBeUndefined();
    // ...and it ends with 25 failed lines of 200: 12.5%, under the limit.
    expect(brokenRule(rules, figures(200, 175, 25), null, sample(25, 0, 175, 175, 0))).toBeUndefined();
    // Early refusals past the limit of all the lines stop the batch at once.
    expect(brokenRule(rules, figures(200, 0, 41), null, sample(41, 0, 0, 0, 0))?.message).toBe(
      "stopped: 41 of 200 lines were refused before they ran (20.5%), over max_error_rate 20%",
    );
    expect(brokenRule(rules, figures(200, 0, 40), null, sample(40, 0, 4, 0, 0))).toBeUndefined();
    // Run lines failing at 60% stop it within its minimum sample.
    expect(brokenRule(rules, figures(200, 8, 12), null, sample(0, 0, 24, 20, 12))?.message).toBe(
      "stopped: 12 of 20 lines failed (60%), over max_error_rate 20%",
    );
    // With an eighth refused beside them: 17 ended stand for 17 / (7/8) lines, under 20; 18 for more.
    expect(brokenRule(rules, figures(200, 0, 20), null, sample(0, 3, 21, 17, 17))).toBeUndefined();
    expect(brokenRule(rules, figures(200, 8, 13), null, sample(0, 3, 21, 18, 10))?.message).toBe(
      "stopped: 61.1% of lines fail (10 of 18 that ran failed; 3 of 24 were refused before they ran), over max_error_rate 20%",
    );
    // Half the lines refused as they come, none of the run lines failing: stopped once the sample has its lines.
    expect(brokenRule(rules, figures(200, 0, 9), null, sample(1, 9, 9, 0, 0))).toBeUndefined();
    expect(brokenRule(rules, figures(200, 0, 11), null, sample(1, 10, 10, 2, 0))?.message).toBe(
      "stopped: 50.2% of lines fail (0 of 2 that ran failed; 11 of 21 were refused before they ran), over max_error_rate 20%",
    );
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
