// Synchronous requests' accounts on the embedded ports: their estimated tokens held against the key's
// enqueued-token limit beside its open batches while they run, and their usage kept as one record per key, model,
// endpoint and tier each minute, written soon after and on close.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { singleModelRegistry } from "../../backends/registry.js";
import { newBatchObject } from "../../domain/batch-object.js";
import { UnavailableError } from "../../domain/errors.js";
import { SYNC_USAGE_ID_RE } from "../../domain/ids.js";
import { MemoryState, memoryPorts } from "../../embedded/index.js";
import type { ClusterPorts } from "../../state/ports.js";
import { FsBlobStore } from "../../stores/fs-blob-store.js";
import { SyncAccounts } from "../../tenancy/sync-accounts.js";

let dir: string;
let ports: ClusterPorts;
let clock = 1_764_000_000;
const now = () => clock;
/** Key a's limit on model m. */
const LIMIT = 300;

beforeEach(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "obi-sync-accounts-"));
  ports = await memoryPorts({ state: new MemoryState(), blobs: new FsBlobStore(dir), expirySeconds: 3600, now });
});
afterEach(async () => {
  await ports.close();
  rmSync(dir, { recursive: true, force: true });
});

const accounts = () =>
  new SyncAccounts({ batches: ports.batches, limitOf: (owner, model) => (owner === "a" && model === "m" ? LIMIT : undefined), now });

async function openBatch(owner: string, tokens: number): Promise<void> {
  const b = newBatchObject({
    id: "batch_000000000000000000000001",
    endpoint: "/v1/completions",
    completion_window: "24h",
    inputFileId: "file-x",
    created: now(),
    windowSeconds: 86_400,
    validation: { ok: true, total: 1, errors: [], errorCount: 0, model: "m" },
    registry: singleModelRegistry("/models/m.gguf", false),
  });
  await ports.batches.insert({
    batch: b,
    owner,
    inputKey: "files/x.jsonl",
    shards: [{ byteStart: 0, byteEnd: 10, total: 1 }],
    enqueued: { m: tokens },
  });
}

const work = (tier: "default" | "flex", prompt: number, endpoint = "/v1/chat/completions" as const) => ({
  owner: "a",
  model: "m",
  endpoint,
  tier,
  usage: { promptTokens: prompt, completionTokens: 2, cachedTokens: 1 },
  seconds: 0.25,
});

describe("synchronous requests' accounts", () => {
  it("hold a running request's tokens against its key's limit, beside the key's open batches, until released", async () => {
    const a = accounts();
    await openBatch("a", 100);
    const first = await a.hold("a", "m", 150);
    const refused = await a.hold("a", "m", 100).catch((e) => e);
    expect(refused).toBeInstanceOf(UnavailableError);
    expect(refused).toMatchObject({ code: "token_limit_exceeded", retryAfterSeconds: 5 });
    expect(refused.message).toMatch(/Limit: 300 .*already enqueued .*: 250; this request: 100/);
    // Another model, and a key with no limit, are not held back.
    await (await a.hold("a", "other", 1000))();
    await (await a.hold("b", "m", 10_000))();
    first();
    first();
    const again = await a.hold("a", "m", 200);
    again();
  });

  it("keep one record per key, model, endpoint and tier each minute, written soon and on close", async () => {
    const a = accounts();
    a.record(work("default", 10));
    a.record(work("default", 20));
    a.record(work("flex", 5));
    a.record(work("flex", 7, "/v1/embeddings" as never));
    await a.flush();
    const minute = Math.floor(clock / 60) * 60;
    const kept = await ports.batches.usage({ start: minute, end: minute + 60 });
    expect(kept).toHaveLength(3);
    for (const r of kept) expect(r.batchId).toMatch(SYNC_USAGE_ID_RE);
    const chat = kept.find((r) => r.serviceTier === "default")!;
    expect(chat).toMatchObject({ owner: "a", model: "m", endpoint: "/v1/chat/completions", batch: false, requests: 2, endedAt: clock });
    expect(chat.usage).toMatchObject({ input_tokens: 30, output_tokens: 4, total_tokens: 34, input_tokens_details: { cached_tokens: 2 } });
    // The interactive lane's engine time is dedicated time; flex time is spot time.
    expect(chat.engine_seconds).toEqual({ spot: 0, dedicated: 0.5 });
    expect(kept.find((r) => r.serviceTier === "flex" && r.endpoint === "/v1/chat/completions")?.engine_seconds).toEqual({
      spot: 0.25,
      dedicated: 0,
    });

    // A later minute starts new records; the earlier one, once written, is never written over.
    clock += 60;
    a.record(work("default", 1));
    await a.close();
    const both = await ports.batches.usage({ start: minute, end: minute + 120 });
    expect(both.filter((r) => r.serviceTier === "default").map((r) => [r.endedAt, r.requests])).toEqual([
      [clock - 60, 2],
      [clock, 1],
    ]);
  });
});
