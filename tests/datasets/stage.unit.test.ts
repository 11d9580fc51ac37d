// The output's columns before a job runs: the input's kept under their own names, then the job's result columns,
// named so that they never clash silently with a kept column (a prefix by default when they would), and a clash the
// user wrote (a prefix or a name of their own) refused, naming the field.
import { describe, expect, it } from "vitest";
import { checkFlags, type Job, planStages } from "../../datasets/job.js";
import { outputColumns } from "../../datasets/stage.js";
import { DatasetError } from "../../datasets/tables.js";

const job = (fields: Record<string, unknown>): Job =>
  planStages(undefined, "/data", checkFlags({ input: "in.csv", output: "out.parquet", ...fields }), "/data")[0];
const input = (...names: string[]) => names.map((name) => ({ name, type: "VARCHAR" }));
const GENERATION = ["text", "finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens", "error_code", "error_message"];

function refused(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DatasetError);
    return (err as Error).message;
  }
  throw new Error("not refused");
}

describe("the output's columns", () => {
  it("keeps the result columns' own names when no kept input column has one of them", () => {
    const out = outputColumns(job({ prompt: "{{q}}" }), input("id", "q"), "in.csv");
    expect(out.keep).toEqual(["id", "q"]);
    expect(out.results.map((c) => c.as)).toEqual(GENERATION);
    expect(out.note).toBeUndefined();
  });

  it("prefixes every result column with result_ when a kept input column has a result column's name, and says so", () => {
    for (const clash of ["text", "embedding", "error_code", "finish_reason"]) {
      const endpoint = clash === "embedding" ? "/v1/embeddings" : "/v1/chat/completions";
      const out = outputColumns(job({ prompt: "{{q}}", endpoint }), input("id", "q", clash), "in.csv");
      expect(out.keep).toEqual(["id", "q", clash]);
      expect(out.results.every((c) => c.as === `result_${c.name}`)).toBe(true);
      expect(out.note).toMatch(new RegExp(`the input's '${clash}' is kept under its own name, so the answers' columns are named result_`));
    }
    // Left out with keep, the plain names come back.
    expect(outputColumns(job({ prompt: "{{q}}", keep: ["q"] }), input("q", "text"), "in.csv").results[0].as).toBe("text");
    // An input that holds result_text too: the next free prefix.
    const both = outputColumns(job({ prompt: "{{q}}" }), input("q", "text", "result_text"), "in.csv");
    expect(both.results[0].as).toBe("result2_text");
    // A schema's fields are result columns too.
    const schema = {
      type: "json_schema",
      json_schema: { name: "s", schema: { type: "object", properties: { label: { type: "string" } } } },
    };
    expect(outputColumns(job({ prompt: "{{q}}", response_format: schema }), input("q", "label"), "in.csv").results[0].as).toBe(
      "result_label",
    );
  });

  it("takes the user's prefix and names, and refuses only a clash the user wrote, naming the field", () => {
    const prefixed = outputColumns(job({ prompt: "{{q}}", result_prefix: "llm_" }), input("q", "text"), "in.csv");
    expect(prefixed.results.map((c) => c.as)).toEqual(GENERATION.map((n) => `llm_${n}`));
    expect(prefixed.note).toBeUndefined();
    const named = outputColumns(job({ prompt: "{{q}}", result_names: { text: "answer" } }), input("q", "text"), "in.csv");
    // Renamed, text no longer clashes: the other columns keep their own names.
    expect(named.results.map((c) => c.as)).toEqual(["answer", ...GENERATION.slice(1)]);
    const plain = outputColumns(job({ prompt: "{{q}}", result_prefix: "" }), input("q"), "in.csv");
    expect(plain.results[0].as).toBe("text");
    expect(refused(() => outputColumns(job({ prompt: "{{q}}", result_prefix: "" }), input("q", "text"), "in.csv"))).toBe(
      "in.csv: result_prefix: '' names a result column 'text', as the input column the output keeps: choose another prefix, or leave 'text' out with keep",
    );
    expect(refused(() => outputColumns(job({ prompt: "{{q}}", result_names: { text: "q" } }), input("q"), "in.csv"))).toBe(
      "in.csv: result_names.text: 'q' is an input column the output keeps: choose another name, or leave 'q' out with keep",
    );
    expect(
      refused(() => outputColumns(job({ prompt: "{{q}}", result_names: { text: "x", finish_reason: "x" } }), input("q"), "in.csv")),
    ).toBe("in.csv: result_names.finish_reason: 'x' is also the name of text's column");
    expect(refused(() => outputColumns(job({ prompt: "{{q}}", result_names: { embedding: "v" } }), input("q"), "in.csv"))).toBe(
      "in.csv: result_names.embedding: not a result column of this job (text, finish_reason, prompt_tokens, completion_tokens, cached_tokens, error_code, error_message)",
    );
    // Over HTTP the fields are the request's.
    expect(
      refused(() => outputColumns(job({ prompt: "{{q}}", result_prefix: "" }), input("q", "text"), "in.csv", (f) => `job.${f}`)),
    ).toMatch(/^in\.csv: job\.result_prefix: .*leave 'text' out with job\.keep$/);
  });
});
