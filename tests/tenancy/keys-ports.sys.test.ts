// The ports' part in many keys sharing one deployment, one contract for each implementation (PostgreSQL, memory,
// memory kept in files): enqueued-token limits admitted atomically however many create at once and released by
// any end, usage that outlives a deleted batch, synchronous requests' usage, and claims shared fairly between keys
// by weight.
import { describe, expect, it } from "vitest";
import { singleModelRegistry } from "../../backends/registry.js";
import { newBatchObject } from "../../domain/batch-object.js";
import { transition } from "../../domain/batch-state.js";
import { type ClaimOptions, type ClusterPorts, TokenLimitReached } from "../../state/ports.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";
import { IMPLEMENTATIONS, portsLifecycle } from "../helpers/port-harness.js";

if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);

const now = () => Math.floor(Date.now() / 1000);

describe.each(IMPLEMENTATIONS)("keys on the cluster ports on %s", (_name, skip, harness) => {
  const h = harness();
  let ports: ClusterPorts;
  let n = 0;

  /** Inserts a one-shard batch of `owner`; with `tokens`, held against `limit`. Returns its id. */
  async function batch(owner: string | null, o: { tokens?: number; limit?: number } = {}): Promise<string> {
    const id = `batch_${String(++n).padStart(24, "0")}`;
    const b = newBatchObject({
      id,
      endpoint: "/v1/completions",
      completion_window: "24h",
      inputFileId: "file-x",
      created: now(),
      windowSeconds: 86_400,
      validation: { ok: true, total: 10, errors: [], errorCount: 0, model: "m" },
      registry: singleModelRegistry("/models/m.gguf", false),
    });
    await ports.batches.insert({
      batch: b,
      owner,
      inputKey: "files/x.jsonl",
      shards: [{ byteStart: 0, byteEnd: 100, total: 10 }],
      ...(o.tokens !== undefined ? { enqueued: { m: o.tokens } } : {}),
      ...(o.limit !== undefined ? { tokenLimits: { m: o.limit } } : {}),
    });
    return id;
  }
  const claim = (o: Partial<ClaimOptions> = {}) =>
    ports.queue.claim({ workerId: "w", pool: null, models: ["m"], limit: 1, leaseSeconds: 30, urgentSeconds: 1, now: now(), ...o });
  const end = (id: string, to: "cancelled" | "failed") =>
    ports.batches.update(id, ["validating", "in_progress"], (r) => {
      transition(r.batch, to, now());
    });

  portsLifecycle(h, skip, (opened) => {
    ports = opened;
  });

  it.skipIf(skip)(
    "admits a key's batches up to its enqueued-token limit, whoever else creates, and nothing is recorded past it",
    async () => {
      await batch("a", { tokens: 600, limit: 1000 });
      const refused = await batch("a", { tokens: 500, limit: 1000 }).catch((e) => e);
      expect(refused).toBeInstanceOf(TokenLimitReached);
      expect(refused).toMatchObject({ model: "m", limit: 1000, enqueued: 600, requested: 500 });
      // Another key's batches count against its own limit only; a batch with no limit is never refused.
      await batch("b", { tokens: 900, limit: 1000 });
      await batch("a", { tokens: 5000 });
      expect((await ports.batches.list({ limit: 10, owner: "a" })).data).toHaveLength(2);
      const enqueued = await ports.batches.enqueued();
      expect(enqueued).toEqual(
        expect.arrayContaining([
          { owner: "a", model: "m", tokens: 5600 },
          { owner: "b", model: "m", tokens: 900 },
        ]),
      );
    },
  );

  it.skipIf(skip)("lets exactly as many concurrent creates through as the limit holds", async () => {
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, () => batch("a", { tokens: 300, limit: 1000 })));
    expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(3);
    for (const o of outcomes) if (o.status === "rejected") expect(o.reason).toBeInstanceOf(TokenLimitReached);
    expect(await ports.batches.enqueued()).toEqual([{ owner: "a", model: "m", tokens: 900 }]);
  });

  it.skipIf(skip)("releases a batch's tokens when it ends, however it ends", async () => {
    const first = await batch("a", { tokens: 700, limit: 1000 });
    const second = await batch("a", { tokens: 300, limit: 1000 });
    await expect(batch("a", { tokens: 100, limit: 1000 })).rejects.toBeInstanceOf(TokenLimitReached);
    await end(first, "cancelled");
    expect(await ports.batches.enqueued()).toEqual([{ owner: "a", model: "m", tokens: 300 }]);
    await batch("a", { tokens: 700, limit: 1000 });
    await end(second, "failed");
    await batch("a", { tokens: 300, limit: 1000 });
  });

  it.skipIf(skip)("keeps an ended batch's usage record after the batch is deleted", async () => {
    const id = await batch("a");
    const [s] = await claim();
    await ports.queue.commit(
      s,
      { part: { output: "p" }, completed: 9, failed: 1, usage: { promptTokens: 30, completionTokens: 20, cachedTokens: 5 } },
      30,
    );
    await ports.batches.update(id, ["validating"], (r) => {
      transition(r.batch, "in_progress", now());
      transition(r.batch, "finalizing", now());
      transition(r.batch, "completed", now());
    });
    const range = { start: now() - 60, end: now() + 60 };
    const [kept] = await ports.batches.usage(range);
    expect(kept).toMatchObject({ batchId: id, owner: "a", model: "m", requests: 9, endpoint: "/v1/completions" });
    expect(kept.usage).toMatchObject({ input_tokens: 30, output_tokens: 20, input_tokens_details: { cached_tokens: 5 } });
    await ports.batches.remove(id);
    expect(await ports.batches.get(id)).toBeUndefined();
    expect(await ports.batches.usage(range)).toEqual([kept]);
    expect(await ports.batches.usage({ start: range.end, end: range.end + 60 })).toEqual([]);
  });

  it.skipIf(skip)("keeps synchronous requests' usage records, each replaced by its id, beside the batches'", async () => {
    const minute = Math.floor(now() / 60) * 60;
    const record = (requests: number) => ({
      batchId: `sync_${minute}_p_k`,
      owner: "a",
      model: "m",
      endpoint: "/v1/chat/completions",
      endedAt: minute,
      requests,
      usage: {
        input_tokens: 10 * requests,
        output_tokens: 3 * requests,
        total_tokens: 13 * requests,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens_details: { reasoning_tokens: 0 },
      },
      engine_seconds: { spot: 0, dedicated: 0.5 * requests },
      batch: false as const,
      serviceTier: "default" as const,
    });
    await ports.batches.keepUsage(record(1));
    await ports.batches.keepUsage(record(4));
    const range = { start: minute, end: minute + 60 };
    expect(await ports.batches.usage(range)).toEqual([record(4)]);
    expect(await ports.batches.usage({ start: minute + 60, end: minute + 120 })).toEqual([]);
  });

  it.skipIf(skip)(
    "gives claims to keys by weight, not to the oldest batch: a key's 20 queued batches hold back another's 1 by one shard at most",
    async () => {
      const a = [];
      for (let i = 0; i < 20; i++) a.push(await batch("a"));
      const b = await batch("b");
      const order: string[] = [];
      for (let i = 0; i < 3; i++) order.push((await claim())[0].batchId);
      expect(order).toEqual([a[0], b, a[1]]);
      // Weights: c at 2 gets two claims to a's one.
      await h.reset();
      const owners: string[] = [];
      for (let i = 0; i < 6; i++) await batch("a");
      for (let i = 0; i < 6; i++) await batch("c");
      const ownerOf = new Map<string, string>();
      for (const row of [...(await ports.batches.list({ limit: 20, owner: "a" })).data]) ownerOf.set(row.id, "a");
      for (const row of [...(await ports.batches.list({ limit: 20, owner: "c" })).data]) ownerOf.set(row.id, "c");
      for (let i = 0; i < 6; i++) owners.push(ownerOf.get((await claim({ weights: { c: 2 } }))[0].batchId)!);
      expect(owners).toEqual(["a", "c", "c", "a", "c", "c"]);
    },
  );

  it.skipIf(skip)("a key back from idle starts level with the others, not ahead by its idle time", async () => {
    for (let i = 0; i < 6; i++) await batch("a");
    for (let i = 0; i < 4; i++) await claim();
    for (let i = 0; i < 2; i++) await batch("b");
    const ownerOf = async (id: string) => ((await ports.batches.get(id, "b")) ? "b" : "a");
    const next: string[] = [];
    for (let i = 0; i < 4; i++) next.push(await ownerOf((await claim())[0].batchId));
    // b's two batches interleave with a's last two, rather than both going first.
    expect(next).toEqual(["b", "a", "b", "a"]);
  });
});
