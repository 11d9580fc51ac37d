// A JSON body nested past the one bound (openai/json-depth.ts) is refused before any route walks it: a 400 naming
// its top field, however deep it goes, where a walk of it would have overflowed the stack.
import type { RequestHandler } from "express";
import { nestingTooDeep, tooDeepAt } from "../../openai/json-depth.js";
import { ApiError } from "../errors.js";

export const boundedNesting: RequestHandler = (req, _res, next) => {
  const body: unknown = req.body;
  const path = body !== null && typeof body === "object" ? tooDeepAt(body) : null;
  if (!path) return next();
  const refusal = nestingTooDeep(path);
  next(new ApiError(400, refusal.message, "invalid_request_error", refusal.code, refusal.param));
};
