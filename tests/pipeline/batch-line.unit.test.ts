import { describe, expect, it } from "vitest";
import { describeIssue } from "../../openai/zod-errors.js";
import { BatchLineSchema } from "../../pipeline/batch-line.js";

const problem = (schema: { safeParse(v: unknown): any }, value: unknown) => {
  const r = schema.safeParse(value);
  if (r.success) throw new Error("expected a failure");
  return describeIssue(r.error, value);
};

describe("BatchLineSchema", () => {
  it("accepts an OpenAI line and names the field of a bad one", () => {
    expect(BatchLineSchema.safeParse({ custom_id: "a", method: "POST", url: "/v1/completions", body: {} }).success).toBe(true);
    expect(problem(BatchLineSchema, { custom_id: "a", method: "PUT", url: "/v1/completions", body: {} }).param).toBe("method");
    expect(problem(BatchLineSchema, { custom_id: "a".repeat(513), method: "POST", url: "/v1/completions", body: {} }).param).toBe(
      "custom_id",
    );
    expect(problem(BatchLineSchema, { custom_id: "a", method: "POST", url: "/v1/completions" })).toMatchObject({
      missing: true,
      param: "body",
    });
  });
});
