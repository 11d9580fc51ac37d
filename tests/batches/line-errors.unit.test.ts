// The console's failed lines of a batch: in input order whatever order the error file has them in, and a batch's
// own reason (a token limit, a stop rule, its file's problems at validation) never shown as a failed line.
import { describe, expect, it } from "vitest";
import { lineErrors } from "../../batches/line-errors.js";
import type { Batch } from "../../domain/objects.js";

async function* lines(items: unknown[]): AsyncGenerator<string> {
  for (const i of items) yield JSON.stringify(i);
}

const batch = (over: Partial<Batch>) => ({ id: `batch_${Math.random()}`, errors: null, error_file_id: null, ...over }) as Batch;
const input = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ custom_id: `r-${i + 1}`, method: "POST", url: "/v1/completions", body: {} }));
const failed = (id: string, code: string) => ({ custom_id: id, response: null, error: { code, message: `${code} message` } });

describe("a batch's failed lines for the console", () => {
  it("lists them by input line, whatever the error file's order", async () => {
    const order = [6, 10, 4, 8, 31, 1];
    const got = await lineErrors(batch({}), {
      errorLines: () => lines(order.map((n) => failed(`r-${n}`, n === 31 ? "batch_cancelled" : "server_error"))),
      inputLines: () => lines(input(40)),
    });
    expect(got.line_errors.map((e) => e.line)).toEqual([1, 4, 6, 8, 10, 31]);
    expect(got.line_error_counts).toEqual({ failed: 5, not_run: 1 });
  });

  it("leaves a batch's own reason out of its lines: refused over a token limit, it has none", async () => {
    const refused = batch({
      errors: { object: "list", data: [{ code: "token_limit_exceeded", message: "over the limit", line: null, param: null }] },
    });
    const got = await lineErrors(refused, { errorLines: () => lines([]), inputLines: () => lines(input(3)) });
    expect(got).toEqual({ line_errors: [], line_error_counts: { failed: 0, not_run: 0 } });
  });

  it("shows a stopped batch's error file, not its stop reason; validation errors keep their lines", async () => {
    const stopped = batch({
      error_file_id: "file-x",
      errors: { object: "list", data: [{ code: "stop_rule", message: "stopped: …", line: null, param: "metadata.max_error_rate" }] },
    });
    const got = await lineErrors(stopped, {
      errorLines: () => lines([failed("r-2", "unsupported_parameter"), failed("r-3", "batch_failed")]),
      inputLines: () => lines(input(3)),
    });
    expect(got.line_errors.map((e) => [e.line, e.code, e.not_run])).toEqual([
      [2, "unsupported_parameter", false],
      [3, "batch_failed", true],
    ]);
  });

  it("gives a batch refused at validation no failed line: no request ran, its file's problems are its reason", async () => {
    const invalid = batch({
      errors: { object: "list", data: [{ code: "invalid_json_line", message: "not JSON", line: 2, param: null }] },
    });
    const v = await lineErrors(invalid, { errorLines: () => lines([]), inputLines: () => lines(input(1)) });
    expect(v).toEqual({ line_errors: [], line_error_counts: { failed: 0, not_run: 0 } });
  });
});
