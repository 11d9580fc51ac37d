// Validation of an uploaded batch file before it is queued: one streaming pass, memory flat apart
// from the Set of custom_ids. File-level faults (not JSON, a bad envelope, duplicate custom_ids, another
// endpoint's url, two models, too many lines) are reported with their 1-based line like OpenAI's batch
// `errors.data`; the list is capped, the count is not. Request bodies are checked when each line runs,
// so one bad body fails only its own request, as OpenAI does.
import type { Readable } from "node:stream";
import { tooDeepAt } from "../openai/json-depth.js";
import { describeIssue } from "../openai/zod-errors.js";
import { BatchLineSchema } from "./batch-line.js";
import { readJsonlLines } from "./jsonl.js";
import { lineTokens } from "./token-estimate.js";
import type { Endpoint, LineError, ValidationLimits, ValidationResult } from "./types.js";

export const DEFAULT_MAX_ERRORS = 100;

/** A field of the line envelope -> the error code a problem with it gets. */
const ENVELOPE_CODES: Record<string, string> = {
  custom_id: "invalid_custom_id",
  method: "invalid_method",
  url: "invalid_url",
  body: "invalid_body",
};

/** Validates a batch input: its path, or a stream of its bytes (read once, never held whole). */
export async function validateBatchFile(
  source: string | Readable,
  endpoint: Endpoint,
  limits: ValidationLimits,
): Promise<ValidationResult> {
  const maxErrors = limits.maxErrors ?? DEFAULT_MAX_ERRORS;
  const errors: LineError[] = [];
  let errorCount = 0;
  const report = (e: LineError) => {
    errorCount++;
    if (errors.length < maxErrors) errors.push(e);
  };

  const seen = new Set<string>();
  let total = 0;
  let model: string | undefined;
  let modelLine: number | undefined;
  const named = new Map<string, number>();
  const enqueued = new Map<string, number>();
  // Blank lines are an error only when a request follows them; trailing ones are ignored.
  let blankFrom = 0;
  let blankTo = 0;

  try {
    for await (const line of readJsonlLines(source, { maxLineBytes: limits.maxLineBytes })) {
      if (!line.tooLong && line.text.trim() === "") {
        if (blankFrom === 0) blankFrom = line.lineNo;
        blankTo = line.lineNo;
        continue;
      }
      for (let n = blankFrom; blankFrom > 0 && n <= blankTo; n++) {
        report({ code: "invalid_json_line", message: "Blank line: every line must be a JSON request object.", line: n });
      }
      blankFrom = 0;

      total++;
      if (total === limits.maxRequests + 1) {
        report({
          code: "too_many_requests",
          message: `A batch may hold at most ${limits.maxRequests} requests; line ${line.lineNo} is request ${total}.`,
          line: line.lineNo,
        });
      }
      if (line.tooLong) {
        report({ code: "line_too_long", message: `Line is ${line.bytes} bytes; the limit is ${limits.maxLineBytes}.`, line: line.lineNo });
        continue;
      }
      const checked = checkLine(line.text, line.lineNo, endpoint, seen, report);
      const lineModel = checked?.model;
      // A line naming no model runs on the default one, where there is one: its tokens are kept under "".
      if (checked?.body) {
        const named = lineModel ?? "";
        enqueued.set(named, (enqueued.get(named) ?? 0) + lineTokens(endpoint, checked.body, limits.countTokens));
      }
      if (lineModel !== undefined) {
        if (!named.has(lineModel)) named.set(lineModel, line.lineNo);
        if (model === undefined) [model, modelLine] = [lineModel, line.lineNo];
        else if (lineModel !== model && limits.oneModel !== false) {
          report({
            code: "mismatched_model",
            message: `All requests in a batch must use the same model: this line names '${lineModel}', earlier lines '${model}'.`,
            line: line.lineNo,
            param: "body.model",
          });
        }
      }
    }
  } catch (err) {
    report({ code: "unreadable_file", message: `The file could not be read: ${(err as Error).message}`, line: null });
  }

  if (total === 0 && errorCount === 0) {
    report({ code: "empty_file", message: "The file holds no requests.", line: null });
  }
  const result: ValidationResult = { ok: errorCount === 0, total, errors, errorCount, enqueuedTokens: Object.fromEntries(enqueued) };
  if (model !== undefined) [result.model, result.modelLine] = [model, modelLine];
  result.models = [...named].map(([m, line]) => ({ model: m, line }));
  return result;
}

/**
 * Checks one non-blank line's envelope; returns the body's model when it names one, even on a line refused, and
 * the body of a line that passed.
 */
function checkLine(
  text: string,
  lineNo: number,
  endpoint: Endpoint,
  seen: Set<string>,
  report: (e: LineError) => void,
): { model?: string; body?: Record<string, unknown> } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    report({ code: "invalid_json_line", message: `Line is not valid JSON: ${(err as Error).message}`, line: lineNo });
    return undefined;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    report({ code: "invalid_json_line", message: "Line must be a JSON object.", line: lineNo });
    return undefined;
  }

  const envelope = BatchLineSchema.safeParse(value);
  if (!envelope.success) {
    const { message, param, missing } = describeIssue(envelope.error, value);
    const field = String(envelope.error.issues[0].path[0] ?? "");
    report({ code: missing ? "missing_required_parameter" : (ENVELOPE_CODES[field] ?? "invalid_request"), message, line: lineNo, param });
    return undefined;
  }
  const { custom_id, url, body } = envelope.data;
  // A refused line still says which model the file asked for (the failed batch reports it).
  const model = typeof body.model === "string" ? body.model : undefined;

  if (seen.has(custom_id)) {
    report({
      code: "duplicate_custom_id",
      message: `The custom_id '${custom_id}' appears on an earlier line; custom_ids must be unique.`,
      line: lineNo,
      param: "custom_id",
    });
    return { model };
  }
  seen.add(custom_id);

  if (url !== endpoint) {
    report({
      code: "mismatched_url",
      message: `The url '${url}' does not match the batch endpoint '${endpoint}'.`,
      line: lineNo,
      param: "url",
    });
    return { model };
  }
  // A body nested past the bound is its line's own 400 when it runs (parse/request.ts); estimating its tokens would
  // walk it first, so it reserves none.
  return tooDeepAt(body) ? { model } : { model, body: body as Record<string, unknown> };
}
