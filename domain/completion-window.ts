// completion_window: OpenAI only accepts "24h"; the service also takes other durations so short SLAs can be tested.
import { InvalidRequestError } from "./errors.js";

const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86_400 } as const;
const MAX_SECONDS = 366 * 86_400;

/** "24h" -> 86400. Accepts a positive integer followed by s, m, h or d (up to a year); anything else is a 400. */
export function parseCompletionWindow(s: string): number {
  const m = typeof s === "string" ? /^\s*(\d{1,9})\s*([smhd])\s*$/.exec(s) : null;
  const seconds = m ? Number(m[1]) * UNIT_SECONDS[m[2] as keyof typeof UNIT_SECONDS] : NaN;
  if (!(seconds > 0 && seconds <= MAX_SECONDS)) {
    throw new InvalidRequestError(
      `Invalid completion_window '${String(s)}': use a duration such as "24h", "30m", "2h", "10s" or "1d" (at most 366d).`,
      "invalid_request",
      "completion_window",
    );
  }
  return seconds;
}
