// When to try an upstream request again: exponential backoff with full jitter (a random wait up to the
// exponential bound, so clients that failed together do not come back together), unless the upstream said
// when with Retry-After (seconds or an HTTP date), which is honoured.

export const RETRY_BASE_MS = 250;
export const RETRY_CAP_MS = 30_000;

/** Milliseconds before attempt `attempt` (1 = the first retry). `random` in [0, 1). */
export function backoffMs(attempt: number, random: () => number = Math.random, base = RETRY_BASE_MS, cap = RETRY_CAP_MS): number {
  return Math.floor(random() * Math.min(cap, base * 2 ** Math.max(0, attempt - 1)));
}

/** Retry-After in milliseconds, or undefined when absent or unreadable. Capped at RETRY_CAP_MS x 4. */
export function retryAfterMs(header: string | string[] | undefined, now = Date.now()): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || value.trim() === "") return undefined;
  const seconds = Number(value);
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(value) - now;
  if (!Number.isFinite(ms)) return undefined;
  return Math.min(Math.max(0, ms), RETRY_CAP_MS * 4);
}

/** Statuses that say "not now" rather than "not this request": tried again. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status === 500 || status === 502 || status === 503 || status === 504;
}
