// Token usage added up over lines and runs.
import type { TokenUsage } from "./types.js";

export const emptyUsage = (): TokenUsage => ({ promptTokens: 0, completionTokens: 0, cachedTokens: 0 });

/** Adds `u` into `into` in place. */
export function addUsage(into: TokenUsage, u: TokenUsage): void {
  into.promptTokens += u.promptTokens;
  into.completionTokens += u.completionTokens;
  into.cachedTokens += u.cachedTokens;
}
