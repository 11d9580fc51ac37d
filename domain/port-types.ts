// The small types every port of the domain names: who owns an object, a page of a list, a store's answer now or
// later, a retention. A leaf module: the ports and their parts (batch-commands.ts, batch-reads.ts, batch-views.ts)
// import it, and it imports nothing.

/** Who owns an object: a stable hash of the API key, or null when auth is off. Never the key itself. */
export type Owner = string | null;

/** Routes await what a store answers (PostgreSQL's later, one process's at once). */
export type Awaitable<T> = T | Promise<T>;

export interface Page<T> {
  data: T[];
  has_more: boolean;
}

/** OpenAI's retention setting: expire `seconds` after the file's created_at. */
export interface ExpiresAfter {
  anchor: "created_at";
  seconds: number;
}
