// Turning untrusted request parts into typed values, or into OpenAI-shaped 400/404 errors.
import type { z } from "zod";
import { describeIssue, paramPath, valueAt } from "../../openai/zod-errors.js";
import { type ApiError, badRequest, notFound } from "../errors.js";

/** Parses `input` with `schema`; a failure becomes a 400 naming the first offending parameter, as OpenAI does. */
export function parseRequest<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw fromZodError(result.error, input);
}

/**
 * The 400 for a failed parse: the first issue, naming its parameter. With the input at hand, a wrong type
 * or value where nothing was sent at all is reported as a missing parameter, as OpenAI does.
 */
export function fromZodError(error: z.ZodError, input?: unknown): ApiError {
  const issue = error.issues[0];
  if (!issue) return badRequest("Invalid request.");
  const param = paramPath(issue.path);
  const missing =
    input !== undefined &&
    param !== null &&
    (issue.code === "invalid_type" || issue.code === "invalid_value") &&
    valueAt(input, issue.path) === undefined;
  if (missing) return badRequest(`Missing required parameter: '${param}'.`, param, "missing_required_parameter");
  // zod's own words for a field a strict body does not take, as OpenAI says it (a schema that words its own is left so).
  if (issue.code === "unrecognized_keys" && issue.message.startsWith("Unrecognized key")) {
    const { message, param: key } = describeIssue(error, input);
    return badRequest(message, key, "unknown_parameter");
  }
  // A refusal that says it all itself (a query parameter the route does not take).
  if (issue.code === "custom" && issue.params?.whole) return badRequest(issue.message, param);
  return badRequest(param ? `Invalid '${param}': ${issue.message}` : issue.message, param);
}

/**
 * Validates an id taken from the URL. An id of the wrong shape is reported exactly like an unknown
 * one (404), so nothing about the store leaks and no odd string is ever used to look anything up.
 */
export function parseId(what: "file" | "batch" | "upload", pattern: RegExp, id: unknown): string {
  if (typeof id === "string" && pattern.test(id)) return id;
  throw notFound(what, typeof id === "string" ? id.slice(0, 128) : String(id));
}
