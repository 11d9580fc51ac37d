// How many dataset reads run at once in a process: room for so many, a bounded queue behind them taken in turn by
// key, a read past both refused at once with a Retry-After (429 resource_unavailable), and a read whose client has
// gone out of the queue at once.
import { describe, expect, it } from "vitest";
import { DatasetReads } from "../../dataset-jobs/reads.js";
import { UnavailableError } from "../../domain/errors.js";

describe("dataset reads", () => {
  it("runs so many at once, queues four times as many in order, and refuses the rest with a Retry-After", async () => {
    const reads = new DatasetReads(2);
    let running = 0;
    let most = 0;
    const started: number[] = [];
    const release: Array<() => void> = [];
    const read = (n: number) =>
      reads.run(async () => {
        started.push(n);
        running++;
        most = Math.max(most, running);
        await new Promise<void>((r) => release.push(r));
        running--;
        return n;
      });
    const admitted = Array.from({ length: 10 }, (_, n) => read(n));
    const refused = await read(10).then(
      () => undefined,
      (e) => e,
    );
    expect(refused).toBeInstanceOf(UnavailableError);
    expect(refused).toMatchObject({ code: "resource_unavailable", retryAfterSeconds: 10 });
    expect((refused as Error).message).toMatch(/Too many dataset reads are running or waiting/);
    await Promise.resolve();
    expect(started).toEqual([0, 1]);
    while (started.length < 10 || release.length > 0) {
      release.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    expect(await Promise.all(admitted)).toEqual(Array.from({ length: 10 }, (_, n) => n));
    expect(started).toEqual(Array.from({ length: 10 }, (_, n) => n));
    expect(most).toBe(2);
    // A read that fails gives its room back.
    await expect(reads.run(() => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    expect(await reads.run(async () => "after")).toBe("after");
  });

  /** A read of `key` that records when it starts and waits to be released. */
  function reader(reads: DatasetReads, started: string[], release: Array<() => void>) {
    return (name: string, key: string, signal?: AbortSignal) =>
      reads.run(
        async () => {
          started.push(name);
          await new Promise<void>((r) => release.push(r));
          return name;
        },
        { key, signal },
      );
  }

  async function drain(started: string[], release: Array<() => void>, count: number) {
    while (started.length < count || release.length > 0) {
      release.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
  }

  it("takes the waiting reads of each key in turn: one key's many creates do not hold back another key's", async () => {
    const reads = new DatasetReads(1);
    const started: string[] = [];
    const release: Array<() => void> = [];
    const read = reader(reads, started, release);
    const all = [read("a0", "a"), read("a1", "a"), read("a2", "a"), read("b0", "b"), read("c0", "c")];
    await expect(read("a3", "a")).rejects.toBeInstanceOf(UnavailableError);
    await drain(started, release, all.length);
    await Promise.all(all);
    expect(started).toEqual(["a0", "a1", "b0", "c0", "a2"]);
  });

  it("drops a waiting read whose client has gone, with the signal's reason, and its place goes to the next", async () => {
    const reads = new DatasetReads(1);
    const started: string[] = [];
    const release: Array<() => void> = [];
    const read = reader(reads, started, release);
    const gone = new AbortController();
    const first = read("a0", "a");
    const dropped = read("a1", "a", gone.signal);
    const kept = read("b0", "b");
    gone.abort(new Error("the client went away"));
    await expect(dropped).rejects.toThrow("the client went away");
    // The queue holds four per room: the dropped read's place is free again.
    const more = [read("c0", "c"), read("c1", "c"), read("c2", "c")];
    await drain(started, release, 5);
    expect(await Promise.all([first, kept, ...more])).toEqual(["a0", "b0", "c0", "c1", "c2"]);
    expect(started).not.toContain("a1");
    // A read whose client has already gone never starts.
    await expect(read("late", "a", gone.signal)).rejects.toThrow("the client went away");
  });
});
