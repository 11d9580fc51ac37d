// A request's key in the result cache: the sha256 of the model's identity (cache/model-identity.ts) and the
// request's canonical form (cache/rule.ts). The scope is not in it: the stores keep scopes apart themselves.
import type { InferenceRequest } from "../openai/backend.js";
import { sha256Hex } from "./digest.js";
import { canonicalBody } from "./rule.js";

export const cacheKey = (identity: string, request: InferenceRequest): string => sha256Hex(`${identity}\n${canonicalBody(request)}`);
