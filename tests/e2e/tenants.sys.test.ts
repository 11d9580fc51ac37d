// What one valid key can do to another key's work on a shared deployment, through the real server process with a
// keys file (an admin, ops; two teams, teamA and teamB) on one spot slot: the operational controls that reach other
// keys' work are an admin's, an admin reads every key's batches alike through OpenAI's and Anthropic's APIs but
// changes only its own, and every refusal names what was refused.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionJsonl } from "../../testkit/workload.js";
import { createBatch, getBatch, isFinal, logLines, pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { getJson, writeKeysFile } from "../helpers/keys.js";
import type { ServerProcess } from "../helpers/process.js";
import { serverTestbed } from "../helpers/server-testbed.js";

// The spot slot comes back a second after a preemption.
const bed = serverTestbed("tenants", { SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0", SPOT_PREEMPT_COOLDOWN_SECONDS: "1" });
const { file, auth } = writeKeysFile(bed.dir, [{ id: "ops", admin: true }, { id: "teamA" }, { id: "teamB" }]);

let s: ServerProcess;
beforeAll(async () => {
  s = await bed.start({ KEYS_FILE: file });
});
afterAll(async () => {
  s?.child.kill("SIGTERM");
  await s?.exited;
});

const send = (method: string, path: string, key: string, body?: unknown) =>
  fetch(`${s.baseUrl}${path}`, {
    method,
    headers: { ...auth[key], ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
const json = async (res: Response) => ({ status: res.status, body: (await res.json()) as any });

/** A batch of `n` lines as `key` (long ones hold the one slot while the test works). */
async function submit(key: string, n: number, maxTokens: number, tag: string): Promise<any> {
  const up = await uploadJsonl(s.baseUrl, completionJsonl(n, { prefix: tag, maxTokens, temperature: 1 }), auth[key]);
  const created = await createBatch(s.baseUrl, up.id, auth[key]);
  expect(created.status).toBe(200);
  return created.body;
}
const final = (key: string, id: string) => pollBatch(s.baseUrl, id, isFinal, 120_000, auth[key]);

describe("what a key can do to another key's work", () => {
  it("keeps a spot preemption, which stops every key's work, to admin keys; a pause by model reaches a key's own batches", async () => {
    const hold = await submit("teamA", 400, 200, "hold");
    const running = await pollBatch(s.baseUrl, hold.id, (b) => b.status === "in_progress", 60_000, auth.teamA);

    const refused = await json(await send("POST", "/pools/spot/preempt", "teamB"));
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ type: "permission_error", code: "insufficient_permissions", param: null });
    expect(refused.body.error.message).toContain("'teamB' is not an admin key; only an admin key may simulate a spot preemption");
    const spot = (await getJson(s.baseUrl, "/pools", auth.ops)).body.pools.find((p: any) => p.name === "spot");
    expect(spot).toMatchObject({ preempted: 0, preemptions: 0, jobs: [hold.id] });

    // teamB's pause of a model pauses its own batches of it (none), never teamA's.
    const byModel = await json(await send("POST", "/v1/batches/pause", "teamB", { model: running.model }));
    expect(byModel).toMatchObject({ status: 200, body: { object: "list", data: [] } });
    expect((await getBatch(s.baseUrl, hold.id, auth.teamA)).paused_at).toBeNull();
    // Naming teamA is refused, and the refusal names the pause.
    const named = await json(await send("POST", "/v1/batches/pause", "teamB", { api_key_id: "teamA" }));
    expect(named.status).toBe(403);
    expect(named.body.error.message).toBe("Only an admin key may pause another key's batches: api_key_id 'teamA' is not this key's own.");

    const preempted = await json(await send("POST", "/pools/spot/preempt", "ops"));
    expect(preempted).toMatchObject({ status: 200, body: { simulated: true, pool: "spot", preempted: [hold.id] } });
    expect((await json(await send("POST", `/v1/batches/${hold.id}/cancel`, "teamA"))).status).toBe(200);
    expect((await final("teamA", hold.id)).status).toBe("cancelled");
  }, 180_000);

  it("lets an admin read another key's batch, and says it may not cancel it, retry it or read its results, table or files", async () => {
    const batch = await final("teamA", (await submit("teamA", 2, 4, "mine")).id);
    expect(batch.status).toBe("completed");
    expect((await getJson(s.baseUrl, `/v1/batches/${batch.id}`, auth.ops)).status).toBe(200);
    for (const [method, path, action] of [
      ["POST", `/v1/batches/${batch.id}/cancel`, "cancel"],
      ["POST", `/v1/batches/${batch.id}/retry`, "retry"],
      ["GET", `/v1/batches/${batch.id}/results`, "read the results of"],
      ["GET", `/v1/batches/${batch.id}/output`, "read the results of"],
      ["GET", `/v1/batches/${batch.id}/table`, "download the table of"],
    ]) {
      const res = await json(await send(method, path, "ops"));
      expect(res.status, path).toBe(403);
      expect(res.body.error).toMatchObject({ type: "permission_error", code: "insufficient_permissions" });
      expect(res.body.error.message).toBe(
        `An admin key reads every key's batches but may ${action} only its own: batch '${batch.id}' belongs to another key.`,
      );
    }
    // Its files too, whose ids the admin reads on the batch.
    for (const [path, action] of [
      [`/v1/files/${batch.output_file_id}/content`, "download"],
      [`/v1/files/${batch.input_file_id}`, "retrieve"],
    ]) {
      const res = await json(await send("GET", path, "ops"));
      expect(res.status, path).toBe(403);
      expect(res.body.error.message).toContain(`may ${action} only its own files`);
    }
    // A key that cannot read the batch is told it does not exist, as for a batch that does not.
    expect((await send("POST", `/v1/batches/${batch.id}/cancel`, "teamB")).status).toBe(404);
    expect((await send("GET", `/v1/files/${batch.output_file_id}/content`, "teamB")).status).toBe(404);
    expect((await send("GET", `/v1/batches/${batch.id}/results`, "teamA")).status).toBe(200);
    expect((await send("GET", `/v1/batches/${batch.id}/output`, "teamA")).status).toBe(200);
  }, 120_000);

  it("lets an admin read every key's message batches through Anthropic's API as through OpenAI's", async () => {
    const params = { model: "m", max_tokens: 4, messages: [{ role: "user", content: "Hi" }] };
    const created = await json(await send("POST", "/v1/messages/batches", "teamA", { requests: [{ custom_id: "one", params }] }));
    expect(created.status).toBe(200);
    const id: string = created.body.id;
    expect(id).toMatch(/^msgbatch_/);
    await final("teamA", id);

    const viaOpenAI = await getJson(s.baseUrl, `/v1/batches/${id}`, auth.ops);
    expect(viaOpenAI.status).toBe(200);
    const viaAnthropic = await getJson(s.baseUrl, `/v1/messages/batches/${id}`, auth.ops);
    expect(viaAnthropic).toMatchObject({ status: 200, body: { id, type: "message_batch", processing_status: "ended" } });
    // The same counts its own key reads.
    expect(viaAnthropic.body.request_counts).toEqual(
      (await getJson(s.baseUrl, `/v1/messages/batches/${id}`, auth.teamA)).body.request_counts,
    );
    const listed = (await getJson(s.baseUrl, "/v1/messages/batches?limit=100", auth.ops)).body.data.map((b: any) => b.id);
    expect(listed).toContain(id);
    expect((await getJson(s.baseUrl, "/v1/messages/batches?limit=100", auth.teamB)).body.data).toEqual([]);
    expect((await getJson(s.baseUrl, `/v1/messages/batches/${id}`, auth.teamB)).status).toBe(404);
    // Reading is all: its cancel, delete and results stay teamA's, said in Anthropic's envelope.
    for (const [method, path] of [
      ["POST", `/v1/messages/batches/${id}/cancel`],
      ["DELETE", `/v1/messages/batches/${id}`],
      ["GET", `/v1/messages/batches/${id}/results`],
    ]) {
      const res = await json(await send(method, path, "ops"));
      expect(res.status, path).toBe(403);
      expect(res.body).toMatchObject({ type: "error", error: { type: "permission_error" } });
      expect(res.body.error.message).toContain("belongs to another key");
    }
  }, 120_000);

  it("never writes a key sent in the query string to the log, however it is sent", async () => {
    const secret = auth.teamA.authorization.slice("Bearer ".length);
    for (const query of [`api_key=${secret}`, `limit=1&token=${secret}`, `q=${encodeURIComponent(`Bearer ${secret}`)}`]) {
      const res = await fetch(`${s.baseUrl}/v1/batches?${query}`);
      expect(res.status).toBe(401);
    }
    await new Promise((r) => setTimeout(r, 200));
    const out = s.output();
    expect(out).not.toContain(secret);
    const urls = logLines(out)
      .filter((l) => l.req?.url?.startsWith("/v1/batches?"))
      .map((l) => l.req.url);
    expect(urls).toEqual(
      expect.arrayContaining(["/v1/batches?api_key=[redacted]", "/v1/batches?limit=1&token=[redacted]", "/v1/batches?q=[redacted]"]),
    );
  });

  it("keeps each key's usage out of /metrics but for an admin key's scrape, the rest open", async () => {
    // Both teams have ended batches by now (the tests above).
    const open = await fetch(`${s.baseUrl}/metrics`);
    expect(open.status).toBe(200);
    const text = await open.text();
    expect(text).toMatch(/^obi_batches_total\{/m);
    expect(text).not.toMatch(/obi_key_|teamA|teamB/);
    expect(await (await fetch(`${s.baseUrl}/metrics`, { headers: auth.teamB })).text()).not.toMatch(/obi_key_|teamA/);
    const admin = await (await fetch(`${s.baseUrl}/metrics`, { headers: auth.ops })).text();
    expect(admin).toMatch(/obi_key_tokens_total\{key="teamA",model="[^"]+",kind="output"\} [1-9]/);
    expect((await fetch(`${s.baseUrl}/metrics`, { headers: { authorization: "Bearer sk-not-a-key" } })).status).toBe(401);
  });
});
