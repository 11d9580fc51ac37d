// How many dataset reads run at once in a process: room for so many, a bounded FIFO queue behind them, and a read
// past both refused at once with a Retry-After (429 resource_unavailable), never left to wait unseen.
import { describe, expect, it } from "vitest";
import { DatasetReads } from "../../cluster/dataset-reads.js";
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
});
