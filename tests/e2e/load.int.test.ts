// A bounded load test on loopback: 20 clients submit 60 small batches at once against a queue of 20.
// Each submission is either accepted or refused with 429 + Retry-After; every accepted batch
// completes with each of its custom_ids exactly once; a refusal leaves nothing behind, and a retry
// of it later goes through. The figures are printed for docs/reliability.md.
import { readdirSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionJsonl, customIds } from "../../testkit/workload.js";
import { accountIds, createBatch, isFinal, uploadJsonl } from "../helpers/http-batches.js";
import { startTestService, type TestService } from "../helpers/service.js";

const CLIENTS = 20;
const BATCHES_PER_CLIENT = 3;
const REQUESTS_PER_BATCH = 4;
const MAX_QUEUE_DEPTH = 20;

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ MAX_QUEUE_DEPTH: String(MAX_QUEUE_DEPTH) });
});
afterAll(async () => svc?.close());

interface Submission {
  prefix: string;
  fileId: string;
  batchId?: string;
  refusals: number;
}

/** Waits until every batch in `ids` is final, watching them all through one list call at a time. */
async function allFinal(ids: string[], timeoutMs = 60_000): Promise<Map<string, any>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const page = (await (await fetch(`${svc.baseUrl}/v1/batches?limit=100`)).json()) as any;
    const byId = new Map<string, any>(page.data.map((b: any) => [b.id, b]));
    if (ids.every((id) => byId.has(id) && isFinal(byId.get(id)))) return byId;
    if (Date.now() > deadline) throw new Error(`batches still running after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("load", () => {
  it("accepts or refuses (429) every submission, completes every accepted batch, loses and repeats nothing", async () => {
    // Each client uploads its files, then all creates go out together.
    const submissions: Submission[][] = await Promise.all(
      Array.from({ length: CLIENTS }, async (_, c) => {
        const mine: Submission[] = [];
        for (let k = 0; k < BATCHES_PER_CLIENT; k++) {
          const prefix = `c${c}-b${k}`;
          const file = await uploadJsonl(svc.baseUrl, completionJsonl(REQUESTS_PER_BATCH, { prefix, maxTokens: 16 }));
          mine.push({ prefix, fileId: file.id, refusals: 0 });
        }
        return mine;
      }),
    );
    const all = submissions.flat();
    const statuses: number[] = [];

    /** One create per submission still without a batch, each client sending its own one after another. */
    const submitRound = () =>
      Promise.all(
        submissions.map(async (mine) => {
          for (const sub of mine.filter((x) => !x.batchId)) {
            const res = await createBatch(svc.baseUrl, sub.fileId);
            statuses.push(res.status);
            if (res.status === 200) sub.batchId = res.body.id;
            else {
              expect(res.status).toBe(429);
              expect(res.body.error).toMatchObject({ type: "rate_limit_error", code: "queue_full" });
              sub.refusals++;
            }
          }
        }),
      );

    await submitRound();
    const refusedFirst = all.filter((s) => !s.batchId).length;
    // Refused creates left no trace: the folders on disk are exactly the accepted batches.
    const folders = () =>
      readdirSync(svc.batchDir)
        .filter((n) => n.startsWith("batch_"))
        .sort();
    expect(folders()).toEqual(all.flatMap((s) => s.batchId ?? []).sort());
    // A client that was refused retries once the queue has drained (a few rounds at most).
    let rounds = 1;
    for (; rounds < 6 && all.some((s) => !s.batchId); rounds++) {
      await allFinal(all.flatMap((s) => s.batchId ?? []));
      await submitRound();
    }

    const byId = await allFinal(all.map((s) => s.batchId!));
    const finals = all.map((s) => byId.get(s.batchId!));
    let duplicated = 0;
    let missing = 0;
    for (const [i, s] of all.entries()) {
      const expected = customIds(s.prefix, REQUESTS_PER_BATCH);
      const acc = accountIds(svc.batchDir, s.batchId!, expected);
      duplicated += acc.duplicated.length;
      missing += acc.missing.length;
      expect(finals[i]).toMatchObject({
        status: "completed",
        request_counts: { completed: REQUESTS_PER_BATCH, failed: 0, total: REQUESTS_PER_BATCH },
      });
    }
    const figures = {
      batches_tried: all.length,
      create_calls: statuses.length,
      accepted_first_try: all.length - refusedFirst,
      refused_429: statuses.filter((x) => x === 429).length,
      other_statuses: statuses.filter((x) => x !== 200 && x !== 429).length,
      rounds,
      accepted_in_all: all.filter((s) => s.batchId).length,
      completed: finals.filter((b) => b?.status === "completed").length,
      requests: all.length * REQUESTS_PER_BATCH,
      requests_lost: missing,
      custom_ids_duplicated: duplicated,
    };
    console.log(`load test figures: ${JSON.stringify(figures)}`);
    expect(figures).toMatchObject({
      other_statuses: 0,
      accepted_in_all: all.length,
      completed: all.length,
      requests_lost: 0,
      custom_ids_duplicated: 0,
    });
    expect(folders()).toHaveLength(all.length);
  });
});
