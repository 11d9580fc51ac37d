// The batch service on one process's ports. A storage failure while an input is read is the storage's error, not
// a failed batch. A cancel that races another end of the batch answers with the truth: the cancel's own `cancelling`
// when it won, the other end's final status when it lost (never the `in_progress` a batch shows while its last
// lines are written).
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { singleModelRegistry } from "../../backends/registry.js";
import { ClusterBatchService } from "../../batches/batch-service.js";
import type { Config } from "../../config/config.js";
import { newBatchObject } from "../../domain/batch-object.js";
import { transition } from "../../domain/batch-state.js";
import { MemoryState, memoryPorts } from "../../embedded/index.js";
import type { ClusterPorts } from "../../state/ports.js";
import type { BlobStore } from "../../stores/blob-store.js";
import { FsBlobStore } from "../../stores/fs-blob-store.js";
import { testConfig } from "../helpers/embedded-plane.js";

const now = () => Math.floor(Date.now() / 1000);
const registry = singleModelRegistry("/models/m.gguf", false);

describe("the batch service", () => {
  let dir: string;
  let ports: ClusterPorts;
  let service: ClusterBatchService;

  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), "obi-cancel-"));
    const blobs = new FsBlobStore(dir);
    ports = memoryPorts({ state: new MemoryState(), blobs, expirySeconds: 3600, now });
    service = serviceOn(blobs, testConfig(dir));
  });

  function serviceOn(blobs: BlobStore, config: Config): ClusterBatchService {
    return new ClusterBatchService({
      limits: { ...config, shardSize: config.cluster.shardSize },
      ...ports,
      blobs,
      registry,
      scratchDir: path.join(dir, "scratch"),
      logger: pino({ level: "silent" }),
      now,
    });
  }
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** A running batch whose one-second window closed `ago` seconds ago. */
  async function runningBatch(ago: number): Promise<string> {
    const id = "batch_000000000000000000000001";
    const batch = newBatchObject({
      id,
      endpoint: "/v1/completions",
      completion_window: "1s",
      inputFileId: "file-x",
      created: now() - 1 - ago,
      windowSeconds: 1,
      validation: { ok: true, total: 10, errors: [], errorCount: 0, model: "m" },
      registry,
    });
    await ports.batches.insert({ batch, owner: null, inputKey: "files/x.jsonl", shards: [{ byteStart: 0, byteEnd: 100, total: 10 }] });
    await ports.batches.update(id, ["validating"], (r) => transition(r.batch, "in_progress", now()));
    return id;
  }

  it("answers the expiry's final status when the deadline was decided first, once the batch has ended", async () => {
    const id = await runningBatch(5);
    expect(await ports.batches.expireDue(now())).toEqual([id]);
    expect((await ports.batches.get(id))?.batch.status).toBe("in_progress");
    // The expired batch's remaining lines are written a moment later, then it ends.
    setTimeout(() => void ports.batches.update(id, ["in_progress"], (r) => transition(r.batch, "expired", now())), 300);
    const answered = await service.cancel(id, null);
    expect(answered.status).toBe("expired");
    expect(answered.cancelling_at).toBeNull();
    expect((await ports.batches.get(id))?.stopReason).toBe("expired");
  });

  it.each([
    ["kept in scratch space (the batch may need shards)", {}],
    ["read as it streams in (every batch fits one shard)", { MAX_REQUESTS_PER_BATCH: "1000" }],
  ])("answers a storage failure while reading the input with that failure, not a failed batch: %s", async (_how, env) => {
    const fs = new FsBlobStore(dir);
    // The input's first bytes arrive, then the storage fails.
    const failing: BlobStore = Object.assign(Object.create(fs), {
      open: async (key: string) => {
        const real = await fs.open(key);
        if (!real) return undefined;
        real.content.destroy();
        const content = new Readable({ read() {} });
        content.push('{"custom_id":"a","method":"POST","url":"/v1/completions","body":{"model":"m","prompt":"x"}}\n');
        setTimeout(() => content.destroy(Object.assign(new Error("connection reset"), { code: "ECONNRESET" })), 20);
        return { size: real.size, content };
      },
    });
    const lines = ["a", "b"].map((id) => ({
      custom_id: id,
      method: "POST" as const,
      url: "/v1/completions" as const,
      body: { model: "m", prompt: "x" },
    }));
    const create = serviceOn(failing, testConfig(dir, env)).createInline({
      endpoint: "/v1/completions",
      completion_window: "24h",
      lines,
      owner: null,
    });
    await expect(create).rejects.toThrow("connection reset");
    expect((await ports.batches.list({ limit: 10, owner: null })).data).toEqual([]);
  });

  it("answers cancelling when the cancel came first; the deadline then leaves the batch to the cancel", async () => {
    const id = await runningBatch(0);
    const answered = await service.cancel(id, null);
    expect(answered.status).toBe("cancelling");
    expect(await ports.batches.expireDue(now() + 10)).toEqual([]);
    expect((await ports.batches.get(id))?.stopReason).toBe("cancelled");
    expect((await service.cancel(id, null)).status).toBe("cancelling");
  });
});
