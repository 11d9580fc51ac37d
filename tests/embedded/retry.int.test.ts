// Retrying a finished batch's failed lines on one machine: the new batch takes exactly the failed and unrun lines
// (counted in real engine calls), carries metadata.retry_of, and refuses what cannot be retried in the domain's terms.
import path from "node:path";
import { describe, expect, it } from "vitest";
import { InvalidRequestError, NotFoundError } from "../../domain/errors.js";
import type { Engine } from "../../engine/types.js";
import { RequestError } from "../../openai/errors.js";
import { completionJsonl } from "../../testkit/workload.js";
import { controlTestbed, inStatus, readJsonl, untilBatch, upload } from "../helpers/embedded-plane.js";

const bed = controlTestbed();

/** Counts the engine's completions by the custom_id in their prompt; `failing` prompts fail once each, as a server fault. */
function countingEngine(engine: Engine, calls: string[], failing: Set<string>): Engine {
  return new Proxy(engine, {
    get(target, key) {
      if (key === "complete")
        return async (...args: Parameters<Engine["complete"]>) => {
          const prompt = String(args[0]);
          const id = /story \S+ (\d+)/.exec(prompt)?.[1] ?? "?";
          calls.push(id);
          if (failing.delete(id)) throw new RequestError("simulated fault", "simulated_fault", false);
          return target.complete(...args);
        };
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

describe("retrying failed lines (one process)", () => {
  it("reruns only the lines that failed, once each, and links the new batch to the old", async () => {
    const calls: string[] = [];
    const cp = await bed.open({}, (e) => countingEngine(e, calls, new Set(["1", "4"])));
    const file = await upload(cp, bed.dir, completionJsonl(6, { maxTokens: 4 }));
    const first = await cp.batches.create({
      input_file_id: file.id,
      endpoint: "/v1/completions",
      completion_window: "24h",
      metadata: { project: "nightly" },
      owner: null,
    });
    const done = await untilBatch(cp, first.id, inStatus("completed"));
    expect(done.request_counts).toEqual({ completed: 4, failed: 2, total: 6 });
    expect(calls.sort()).toEqual(["0", "1", "2", "3", "4", "5"]);

    await expect(cp.batches.retry(first.id, "someone-else", {})).rejects.toBeInstanceOf(NotFoundError);
    await expect(cp.batches.retry(first.id, null, { codes: ["context_length_exceeded"] })).rejects.toMatchObject({
      code: "nothing_to_retry",
    });

    calls.length = 0;
    const retry = await cp.batches.retry(first.id, null, { codes: ["simulated_fault"] });
    expect(retry.metadata).toEqual({ project: "nightly", retry_of: first.id });
    expect(retry.endpoint).toBe("/v1/completions");
    expect(retry.completion_window).toBe("24h");
    expect(retry.input_file_id).not.toBe(first.input_file_id);
    const again = await untilBatch(cp, retry.id, inStatus("completed"));
    expect(again.request_counts).toEqual({ completed: 2, failed: 0, total: 2 });
    expect(calls.sort()).toEqual(["1", "4"]);
    const out = readJsonl(path.join(bed.dir, retry.id, "output.jsonl")).map((l) => l.custom_id);
    expect(out.sort()).toEqual(["req-1", "req-4"]);

    // Nothing failed the second time: nothing to retry, and no engine call.
    await expect(cp.batches.retry(retry.id, null, {})).rejects.toMatchObject({ code: "nothing_to_retry" });
    expect(calls.length).toBe(2);
  });

  it("takes the lines a cancel left unrun unless told not to, and refuses a batch still running", async () => {
    const calls: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const cp = await bed.open({ SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0", PIPELINE_CONCURRENCY: "2" }, (e) => {
      const counted = countingEngine(e, calls, new Set());
      return new Proxy(counted, {
        get(target, key) {
          if (key === "complete")
            return async (...args: Parameters<Engine["complete"]>) => {
              await gate;
              return target.complete(...args);
            };
          const value = Reflect.get(target, key, target);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
    });
    const file = await upload(cp, bed.dir, completionJsonl(20, { maxTokens: 2 }));
    const running = await cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    await untilBatch(cp, running.id, inStatus("in_progress"));
    const refused = await cp.batches.retry(running.id, null, {}).catch((e) => e);
    expect(refused).toBeInstanceOf(InvalidRequestError);
    expect(refused).toMatchObject({ code: "batch_not_finished", param: "batch_id" });

    await cp.batches.cancel(running.id, null);
    release();
    const cancelled = await untilBatch(cp, running.id, inStatus("cancelled"));
    const ran = cancelled.request_counts.completed;
    expect(cancelled.request_counts.failed).toBe(20 - ran);
    expect(ran).toBeLessThan(20);

    await expect(cp.batches.retry(running.id, null, { include_cancelled: false })).rejects.toMatchObject({ code: "nothing_to_retry" });
    calls.length = 0;
    const retry = await cp.batches.retry(running.id, null, {});
    const done = await untilBatch(cp, retry.id, inStatus("completed"));
    expect(done.request_counts).toEqual({ completed: 20 - ran, failed: 0, total: 20 - ran });
    expect(calls.length).toBe(20 - ran);
    const before = readJsonl(path.join(bed.dir, running.id, "output.jsonl")).map((l) => l.custom_id);
    const after = readJsonl(path.join(bed.dir, retry.id, "output.jsonl")).map((l) => l.custom_id);
    expect(new Set([...before, ...after]).size).toBe(20);
    expect(before.filter((id) => after.includes(id))).toEqual([]);
  });

  it("refuses a batch whose file failed validation, saying why", async () => {
    const cp = await bed.open();
    const file = await upload(cp, bed.dir, "not json\n");
    const failed = await cp.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", owner: null });
    expect(failed.status).toBe("failed");
    const err = await cp.batches.retry(failed.id, null, {}).catch((e) => e);
    expect(err).toMatchObject({ code: "nothing_to_retry" });
    expect(err.message).toContain("failed validation");
  });
});
