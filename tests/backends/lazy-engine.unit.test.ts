// A local model's engine record and the backend that loads at its first request: the record's key follows what
// decides the engine, a damaged file reads as no record, the oldest go past the bound; the backend loads once, runs
// its checks after the load, hands on a run's shape told before it, and a load that fails fails each request.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { engineRecordKey, readEngineRecord, writeEngineRecord } from "../../backends/engine-record.js";
import { LazyBackend } from "../../backends/lazy-backend.js";
import type { BackendInfo, BackendResult, InferenceBackend, InferenceRequest, RunShape } from "../../openai/backend.js";
import { RequestError } from "../../openai/errors.js";
import { parseRequest } from "../../openai/parse.js";
import { tempDir } from "../helpers/scratch.js";

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
  const records = tempDir("engine-records");
  it("are keyed by the model's content and the settings asked for", () => {
    const a = engineRecordKey("d1", { contextSize: 1024 });
    expect(engineRecordKey("d1", { contextSize: 1024 })).toBe(a);
    expect(engineRecordKey("d2", { contextSize: 1024 })).not.toBe(a);
    expect(engineRecordKey("d1", { contextSize: 2048 })).not.toBe(a);
  });

  it("read back whole; a damaged file, a hand-edited record or another model's identity is no record", async () => {
    const file = path.join(records, "engines.json");
    const identity = (digest: string) => JSON.stringify({ kind: "local", sha256: digest, engine: {} });
    const rec = { identity: identity("d1"), info, footprint: 5 };
    expect(await readEngineRecord(file, "k", "d1")).toEqual({});
    writeFileSync(file, '{"k": {"identity": "x"');
    expect(await readEngineRecord(file, "k", "d1")).toEqual({ damaged: "is not a JSON object of records" });
    await writeEngineRecord(file, "k", rec);
    expect(await readEngineRecord(file, "k", "d1")).toEqual({ record: rec });
    // The same record read for another file's content: it never answers for it.
    expect(await readEngineRecord(file, "k", "d2")).toEqual({});
    for (const edit of [
      { footprint: undefined },
      { info: { ...info, settings: null } },
      { info: { ...info, endpoints: [] } },
      { info: { ...info, concurrency: 0 } },
      { info: { ...info, settings: { gpu: "cuda" } } },
    ]) {
      writeFileSync(file, JSON.stringify({ k: { ...rec, ...edit } }));
      expect(await readEngineRecord(file, "k", "d1")).toEqual({});
    }
    for (let i = 0; i < 70; i++) await writeEngineRecord(file, `k${i}`, { ...rec, footprint: i });
    expect(await readEngineRecord(file, "k0", "d1")).toEqual({});
    expect(await readEngineRecord(file, "k69", "d1")).toMatchObject({ record: { footprint: 69 } });
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
