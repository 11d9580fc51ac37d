// The queue's places shared between keys, through the real HTTP surface of an in-process service with a keys file
// and no free slot (one spot slot, preempted by the admin for the test's length: every batch stays queued): a key that filled the queue is refused at its
// share, saying so, and another key's one urgent batch still goes in.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionJsonl } from "../../testkit/workload.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { writeKeysFile } from "../helpers/keys.js";
import { startTestService, type TestService } from "../helpers/service.js";

const DEPTH = 6;
const dir = mkdtempSync(path.join(os.tmpdir(), "obi-queue-share-"));
const { file, auth } = writeKeysFile(dir, [{ id: "ops", admin: true }, { id: "teamA" }, { id: "teamB" }]);

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({
    KEYS_FILE: file,
    MAX_QUEUE_DEPTH: String(DEPTH),
    SPOT_CAPACITY: "1",
    DEDICATED_CAPACITY: "0",
    SPOT_PREEMPT_COOLDOWN_SECONDS: "600",
  });
  const preempted = await fetch(`${svc.baseUrl}/pools/spot/preempt`, { method: "POST", headers: auth.ops });
  expect(preempted.status).toBe(200);
}, 120_000);
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** POST /v1/batches as `key` with this window: the status and body. */
async function create(key: string, window = "24h"): Promise<{ status: number; body: any }> {
  const up = await uploadJsonl(svc.baseUrl, completionJsonl(1, { prefix: key }), auth[key]);
  const res = await fetch(`${svc.baseUrl}/v1/batches`, {
    method: "POST",
    headers: { "content-type": "application/json", ...auth[key] },
    body: JSON.stringify({ input_file_id: up.id, endpoint: "/v1/completions", completion_window: window }),
  });
  return { status: res.status, body: await res.json() };
}

describe("the queue shared between keys", () => {
  it("keeps room for another key's urgent batch in a queue one key filled", async () => {
    const a: number[] = [];
    for (let i = 0; i < DEPTH + 3; i++) a.push((await create("teamA")).status);
    expect(a).toEqual([...Array(DEPTH).fill(200), 429, 429, 429]);

    // teamA's batches wait (none started), and teamB's one urgent batch still goes in.
    const queued = await (await fetch(`${svc.baseUrl}/v1/batches?limit=100`, { headers: auth.teamA })).json();
    expect(queued.data.map((b: any) => b.status)).toEqual(Array(DEPTH).fill("validating"));
    const urgent = await create("teamB", "10m");
    expect(urgent.status).toBe(200);
    expect(urgent.body.status).toBe("validating");

    const refused = await create("teamA");
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ code: "queue_full", type: "rate_limit_error" });
    expect(refused.body.error.message).toContain("this key's share");
    expect(refused.body.error.message).not.toContain("teamB");

    // teamB, under its share, finds the queue full of teamA's batches: told so, by the share rule, not only "full".
    const full = await create("teamB");
    expect(full.status).toBe(429);
    expect(full.body.error).toMatchObject({ code: "queue_full", type: "rate_limit_error" });
    expect(full.body.error.message).toBe(
      `The batch queue is full: of its ${DEPTH} places, this key's batches hold 1, under its share of ${DEPTH / 2} while 2 keys ` +
        `have batches waiting, and other keys' batches hold ${DEPTH}. A key at its share is refused more while others wait, so a ` +
        "place freed (a batch starting) goes to a key under its share, this one among them: retry shortly.",
    );
    expect(full.body.error.message).not.toContain("teamA");
  }, 60_000);
});
