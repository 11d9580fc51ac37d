import { describe, expect, it } from "vitest";
import { isUrgent, JobQueue, type QueuedJob } from "../../api/control/job-queue.js";
import { UnavailableError } from "../../api/control/errors.js";

const NOW = 1_000_000;
let seq = 0;
/** A job submitted `age` seconds ago with a `window`-second completion window. */
const job = (id: string, window = 86_400, age = 0, extra: Partial<QueuedJob> = {}): QueuedJob => ({
  batchId: id,
  seq: ++seq,
  submittedAt: NOW - age,
  deadlineAt: NOW - age + window,
  ...extra,
});

const queue = (maxDepth = 10, urgentSeconds = 600) => new JobQueue({ maxDepth, urgentSeconds, retryAfterSeconds: 30 });

/** Drains the queue the way the worker does: peek, then remove. */
function drain(q: JobQueue): string[] {
  const order: string[] = [];
  for (let j = q.peekNext(NOW); j; j = q.peekNext(NOW)) {
    order.push(j.batchId);
    q.remove(j.batchId);
  }
  return order;
}

describe("job queue", () => {
  it("is FIFO when nothing is urgent", () => {
    const q = queue();
    for (const id of ["a", "b", "c", "d"]) q.enqueue(job(id));
    expect(q.depth).toBe(4);
    expect(drain(q)).toEqual(["a", "b", "c", "d"]);
    expect(q.depth).toBe(0);
  });

  it("with a rank, takes the lowest rank in order (the worker ranks by the model's running batches); urgent still first", () => {
    const q = queue();
    for (const [id, model] of [
      ["a1", "a"],
      ["a2", "a"],
      ["b1", "b"],
      ["a3", "a"],
      ["b2", "b"],
    ])
      q.enqueue(job(id, 86_400, 0, { model }));
    const running = new Map<string, number>([["a", 2]]);
    const rank = (j: QueuedJob) => running.get(j.model ?? "") ?? 0;
    expect(q.peekNext(NOW, rank)?.batchId).toBe("b1");
    running.set("b", 3);
    expect(q.peekNext(NOW, rank)?.batchId).toBe("a1");
    q.enqueue(job("urgent-a", 86_400, 86_400 - 100, { model: "a" }));
    expect(q.peekNext(NOW, rank)?.batchId).toBe("urgent-a");
    expect(q.find((j) => j.model === "b")?.batchId).toBe("b1");
  });

  it("takes urgent jobs first, earliest deadline first, the rest in order", () => {
    const q = queue();
    q.enqueue(job("relaxed-1"));
    q.enqueue(job("urgent-late", 86_400, 86_400 - 500)); // 500 s left < 600 s
    q.enqueue(job("relaxed-2"));
    q.enqueue(job("urgent-soon", 86_400, 86_400 - 100)); // 100 s left
    expect(drain(q)).toEqual(["urgent-soon", "urgent-late", "relaxed-1", "relaxed-2"]);
  });

  it("puts resumed jobs before everything else", () => {
    const q = queue();
    q.enqueue(job("urgent", 86_400, 86_400 - 10));
    q.enqueue(job("resumed", 86_400, 0, { resumed: true }));
    expect(drain(q)).toEqual(["resumed", "urgent"]);
  });

  it("counts a job with under 10% of its window left as urgent", () => {
    // 2 h window, 11 min left: more than urgentSeconds=600 but under 12 min (10%).
    expect(isUrgent({ submittedAt: NOW - 7200 + 660, deadlineAt: NOW + 660 }, NOW, 600)).toBe(true);
    expect(isUrgent({ submittedAt: NOW, deadlineAt: NOW + 7200 }, NOW, 600)).toBe(false);
    expect(isUrgent({ submittedAt: NOW, deadlineAt: NOW + 7200 }, NOW, 0)).toBe(false);
    expect(isUrgent({ submittedAt: NOW - 5000, deadlineAt: NOW + 599 }, NOW, 600)).toBe(true);
  });

  it("rejects a job over MAX_QUEUE_DEPTH with queue_full and a retry delay", () => {
    const q = queue(2);
    q.enqueue(job("a"));
    q.enqueue(job("b"));
    let err: unknown;
    try {
      q.enqueue(job("c"));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UnavailableError);
    expect(err).toMatchObject({ code: "queue_full", retryAfterSeconds: 30 });
    expect(q.depth).toBe(2);
    // Recovered jobs bypass the bound; they were accepted before a restart.
    q.enqueue(job("recovered"), { force: true });
    expect(q.depth).toBe(3);
  });

  it("removes a job from anywhere in the line", () => {
    const q = queue();
    for (const id of ["a", "b", "c"]) q.enqueue(job(id));
    expect(q.remove("b")?.batchId).toBe("b");
    expect(q.remove("b")).toBeUndefined();
    expect(q.has("b")).toBe(false);
    expect(drain(q)).toEqual(["a", "c"]);
  });
});
