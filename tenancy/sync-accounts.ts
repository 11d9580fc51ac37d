// What synchronous requests cost their keys, as batch lines cost them: each request's estimated tokens count
// against its key's enqueued-token limit while it runs (beside the key's open batches), and what it used goes
// into the usage and costs APIs as a record per key, model, endpoint and tier each minute (`batch: false`).
// Records are written a couple of seconds after they change and on close: a crash loses those seconds of usage,
// never a request.
import { createHash, randomBytes } from "node:crypto";
import { syncTokenLimit } from "../domain/errors.js";
import type { Owner } from "../domain/ports.js";
import type { ServedTier } from "../domain/sync-inference.js";
import type { UsageRecord } from "../domain/usage.js";
import type { Endpoint, TokenUsage } from "../openai/backend.js";
import type { BatchRecords } from "../state/ports.js";

export interface SyncAccountsDeps {
  batches: Pick<BatchRecords, "enqueued" | "keepUsage">;
  /** A key's enqueued-token limit on a model (undefined: none). */
  limitOf?: (owner: Owner, model: string) => number | undefined;
  /** Unix seconds. */
  now: () => number;
  onError?: (err: unknown) => void;
}

/** How long a changed record waits to be written, with whatever else changes meanwhile. */
const FLUSH_MS = 2000;

export interface SyncWork {
  owner: Owner;
  model: string;
  endpoint: Endpoint;
  tier: ServedTier;
  usage: TokenUsage;
  /** Answered without running (a repeat in flight, a result cache hit): its output is reported, not charged. */
  cached?: boolean;
  /** Its share of engine time: seconds it held a sequence over the backend's sequences (0 upstream). */
  seconds: number;
}

export class SyncAccounts {
  private readonly running = new Map<string, number>();
  private readonly records = new Map<string, UsageRecord>();
  private readonly dirty = new Set<string>();
  /** Tells this process's records from another's that counts the same key in the same minute. */
  private readonly process = randomBytes(4).toString("hex");
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(private readonly deps: SyncAccountsDeps) {}

  /**
   * Holds `tokens` against the key's limit on `model` until the returned release is called; throws
   * UnavailableError (token_limit_exceeded) when they would pass it.
   */
  async hold(owner: Owner, model: string, tokens: number): Promise<() => void> {
    const key = JSON.stringify([owner, model]);
    const limit = this.deps.limitOf?.(owner, model);
    if (limit !== undefined) {
      const batches = (await this.deps.batches.enqueued()).find((e) => e.owner === owner && e.model === model)?.tokens ?? 0;
      const enqueued = batches + (this.running.get(key) ?? 0);
      if (enqueued + tokens > limit) throw syncTokenLimit(model, limit, enqueued, tokens);
    }
    this.running.set(key, (this.running.get(key) ?? 0) + tokens);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.running.get(key) ?? 0) - tokens;
      if (left > 0) this.running.set(key, left);
      else this.running.delete(key);
    };
  }

  /** Adds an answered request to its minute's record. */
  record(w: SyncWork): void {
    const at = this.deps.now();
    const minute = Math.floor(at / 60) * 60;
    const who = createHash("sha256")
      .update(JSON.stringify([w.owner, w.model, w.endpoint, w.tier]))
      .digest("hex")
      .slice(0, 16);
    const id = `sync_${minute}_${this.process}_${who}`;
    let r = this.records.get(id);
    if (!r) {
      r = {
        batchId: id,
        owner: w.owner,
        model: w.model,
        endpoint: w.endpoint,
        endedAt: minute,
        requests: 0,
        usage: {
          input_tokens: 0,
          output_tokens: 0,
          total_tokens: 0,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens_details: { reasoning_tokens: 0, cached_tokens: 0 },
        },
        engine_seconds: { spot: 0, dedicated: 0 },
        batch: false,
        serviceTier: w.tier,
      };
      this.records.set(id, r);
    }
    // Counted where its last request ended, as a batch is where it ended: within its minute, never before a request.
    r.endedAt = at;
    r.requests++;
    r.usage.input_tokens += w.usage.promptTokens;
    r.usage.output_tokens += w.usage.completionTokens;
    r.usage.total_tokens += w.usage.promptTokens + w.usage.completionTokens;
    r.usage.input_tokens_details.cached_tokens += w.usage.cachedTokens;
    if (w.cached)
      r.usage.output_tokens_details.cached_tokens = (r.usage.output_tokens_details.cached_tokens ?? 0) + w.usage.completionTokens;
    // The interactive lane holds the engine as a dedicated slot does; flex work waits for room as spot work does.
    r.engine_seconds[w.tier === "default" ? "dedicated" : "spot"] += w.seconds;
    this.dirty.add(id);
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, FLUSH_MS).unref();
  }

  /** Writes every changed record (resolves once written); a minute's record is dropped once its minute is over. */
  flush(): Promise<void> {
    this.writing = this.writing.then(async () => {
      const ids = [...this.dirty];
      this.dirty.clear();
      for (const id of ids) {
        const r = this.records.get(id)!;
        await this.deps.batches.keepUsage(structuredClone(r)).catch((err) => {
          this.dirty.add(id);
          this.deps.onError?.(err);
        });
      }
      const current = Math.floor(this.deps.now() / 60) * 60;
      for (const [id, r] of this.records) if (r.endedAt < current && !this.dirty.has(id)) this.records.delete(id);
    });
    return this.writing;
  }

  async close(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.flush();
  }
}
