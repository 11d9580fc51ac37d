// A local model's engine record and the backend that loads at its first request: the record's key follows what
// decides the engine, a damaged file reads as no record, the oldest go past the bound; the backend loads once, runs
// its checks after the load, hands on a run's shape told before it, and a load that fails fails each request.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { engineRecordKey, readEngineRecord, writeEngineRecord } from "../../backends/engine-record.js";
import { LazyBackend } from "../../backends/lazy-backend.js";
import type { BackendInfo, BackendResult, InferenceBackend, InferenceRequest, RunShape } from "../../openai/backend.js";
import { RequestError } from "../../openai/errors.js";
import { parseRequest } from "../../openai/parse.js";

const info: BackendInfo = {
  model: "m",
  kind: "local",
  endpoints: ["/v1/completions"],
  concurrency: 8,
  generatedModel: true,
  settings: { gpu: false },
  summary: "4 sequences",
};

describe("engine records", () => {
  it("are keyed by the model's content and the settings asked for", () => {
    const a = engineRecordKey("d1", { contextSize: 1024 });
    expect(engineRecordKey("d1", { contextSize: 1024 })).toBe(a);
    expect(engineRecordKey("d2", { contextSize: 1024 })).not.toBe(a);
    expect(engineRecordKey("d1", { contextSize: 2048 })).not.toBe(a);
  });

  it("read back whole, a damaged file is no record and is replaced, and the oldest go past 64", async () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), "engine-records-")), "engines.json");
    expect(await readEngineRecord(file, "k")).toBeUndefined();
    writeFileSync(file, '{"k": {"identity": "x"');
    expect(await readEngineRecord(file, "k")).toBeUndefined();
    await writeEngineRecord(file, "k", { identity: "id-k", info, footprint: 5 });
    expect(await readEngineRecord(file, "k")).toEqual({ identity: "id-k", info, footprint: 5 });
    writeFileSync(file, JSON.stringify({ k: { identity: "id-k", info } }));
    expect(await readEngineRecord(file, "k")).toBeUndefined();
    for (let i = 0; i < 70; i++) await writeEngineRecord(file, `k${i}`, { identity: `id${i}`, info, footprint: i });
    expect(await readEngineRecord(file, "k0")).toBeUndefined();
    expect(await readEngineRecord(file, "k69")).toMatchObject({ identity: "id69" });
  });
});

/** A backend that refuses prompts saying "refuse", answers the rest, and keeps the shape it was told. */
class Inner implements InferenceBackend {
  readonly info = info;
  shapes: RunShape[] = [];
  closed = false;
  check(request: InferenceRequest) {
    if (JSON.stringify(request.body).includes("refuse")) throw new RequestError("refused here", "invalid_request", false);
  }
  async execute(request: InferenceRequest): Promise<BackendResult> {
    return { body: { echo: request.body }, usage: { promptTokens: 1, cachedTokens: 0, completionTokens: 1 } };
  }
  async prepareRun(shape: RunShape) {
    this.shapes.push(shape);
  }
  async close() {
    this.closed = true;
  }
}

const completion = (prompt: string) => parseRequest("/v1/completions", { model: "m", prompt, max_tokens: 1 });

describe("LazyBackend", () => {
  it("loads once at its first request, checks each request after the load, and hands on the shape told before", async () => {
    const inner = new Inner();
    let loads = 0;
    const lazy = new LazyBackend(info, async () => {
      loads++;
      return inner;
    });
    const shape: RunShape = { lines: 3, familyLines: 0 };
    await lazy.prepareRun(shape);
    lazy.check(completion("refuse me"));
    expect(loads).toBe(0);
    const [a, b] = await Promise.all([lazy.execute(completion("a")), lazy.execute(completion("b"))]);
    expect([a.body, b.body]).toEqual([{ echo: completion("a").body }, { echo: completion("b").body }]);
    expect(loads).toBe(1);
    expect(inner.shapes).toEqual([shape]);
    await expect(lazy.execute(completion("refuse me"))).rejects.toThrow("refused here");
    expect(() => lazy.check(completion("refuse me"))).toThrow("refused here");
    await lazy.close();
    expect(inner.closed).toBe(true);
  });

  it("a request called off while the model loads stops waiting; the load goes on for the next", async () => {
    let finish: (b: InferenceBackend) => void = () => undefined;
    const lazy = new LazyBackend(info, () => new Promise<InferenceBackend>((r) => (finish = r)));
    const stop = new AbortController();
    const waiting = lazy.execute(completion("a"), stop.signal);
    stop.abort(new Error("drained"));
    await expect(waiting).rejects.toThrow("drained");
    expect(lazy.isLoaded).toBe(false);
    const next = lazy.execute(completion("b"));
    finish(new Inner());
    expect((await next).body).toEqual({ echo: completion("b").body });
  });

  it("closes without loading, and a load that fails fails each request that needed it", async () => {
    let loads = 0;
    const never = new LazyBackend(info, async () => {
      loads++;
      return new Inner();
    });
    await never.close();
    expect(loads).toBe(0);
    const failing = new LazyBackend(info, async () => {
      throw new Error("out of memory");
    });
    await expect(failing.execute(completion("a"))).rejects.toThrow("out of memory");
    await expect(failing.execute(completion("b"))).rejects.toThrow("out of memory");
    await failing.close();
  });
});
