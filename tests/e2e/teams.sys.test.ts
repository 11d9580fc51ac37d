// Many keys on one embedded deployment, through the real server process (app/main.ts) with a keys file: admin-only
// usage, costs and keys (403 for the rest), enqueued-token limits that fail a batch as OpenAI does and are released
// by every end, a kill -9 included, fair shares between keys on one slot, and usage that adds up exactly to the
// batches' own `usage`.
import { execFileSync } from "node:child_process";
import path from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { describe, expect, it } from "vitest";
import { pythonWithOpenAI } from "../../testkit/python.js";
import { repoRoot } from "../../testkit/repo-root.js";
import { completionJsonl } from "../../testkit/workload.js";
import { haveChromium, launchChromium } from "../helpers/browser.js";
import { createBatch, getBatch, isFinal, logLines, pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { getJson, usageByKey, usageOf, writeKeysFile } from "../helpers/keys.js";
import type { ServerProcess } from "../helpers/process.js";
import { serverTestbed } from "../helpers/server-testbed.js";

const python = pythonWithOpenAI();
// One slot: what runs and what waits is the test's to arrange.
const bed = serverTestbed("teams", { SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0" });
const { file, auth } = writeKeysFile(bed.dir, [
  { id: "ops", admin: true },
  { id: "team-a", limits: { "*": 1000 } },
  { id: "team-b", limits: { "*": 6000 } },
  { id: "team-c" },
]);
const start = () => bed.start({ KEYS_FILE: file });
const began = Math.floor(Date.now() / 1000) - 5;

/** Uploads `n` lines of `maxTokens` (at temperature 1: they run their length) as `key` and creates a batch. */
async function submit(s: ServerProcess, key: string, n: number, maxTokens: number, tag: string): Promise<any> {
  const up = await uploadJsonl(s.baseUrl, completionJsonl(n, { prefix: tag, maxTokens, temperature: 1 }), auth[key]);
  const created = await createBatch(s.baseUrl, up.id, auth[key]);
  expect(created.status).toBe(200);
  return created.body;
}
const cancel = (s: ServerProcess, key: string, id: string) =>
  fetch(`${s.baseUrl}/v1/batches/${id}/cancel`, { method: "POST", headers: auth[key] });
const final = (s: ServerProcess, key: string, id: string) => pollBatch(s.baseUrl, id, isFinal, 120_000, auth[key]);

describe("many keys on one embedded deployment", () => {
  let s: ServerProcess;

  it("keeps usage, costs and the keys to admin keys, and a key's batches to itself unless an admin asks", async () => {
    s = await start();
    for (const p of ["/v1/organization/usage/completions", "/v1/organization/usage/embeddings", "/v1/organization/costs"]) {
      const refused = await getJson(s.baseUrl, `${p}?start_time=${began}`, auth["team-a"]);
      expect(refused.status).toBe(403);
      expect(refused.body.error).toMatchObject({ type: "permission_error", code: "insufficient_permissions" });
      expect(refused.body.error.message).toContain("team-a");
      expect((await getJson(s.baseUrl, `${p}?start_time=${began}`, {})).status).toBe(401);
      expect((await getJson(s.baseUrl, `${p}?start_time=${began}`, auth.ops)).status).toBe(200);
    }
    expect((await getJson(s.baseUrl, "/v1/organization/api_keys", auth["team-c"])).status).toBe(403);
    const keys = await getJson(s.baseUrl, "/v1/organization/api_keys", auth.ops);
    expect(keys.body.data.map((k: any) => [k.id, k.admin])).toEqual([
      ["ops", true],
      ["team-a", false],
      ["team-b", false],
      ["team-c", false],
    ]);
    // No key's hash or secret is ever shown.
    expect(JSON.stringify(keys.body)).not.toMatch(/sha256|sk-test/);
    expect((await getJson(s.baseUrl, "/v1/batches?api_key_id=team-b", auth["team-a"])).status).toBe(403);
    // No key changes a limit, its own included: limits live in the keys file.
    for (const method of ["POST", "PATCH"]) {
      const raise = await fetch(`${s.baseUrl}/v1/organization/api_keys/team-a`, {
        method,
        headers: { ...auth["team-a"], "content-type": "application/json" },
        body: JSON.stringify({ enqueued_token_limits: { "*": 10_000_000 } }),
      });
      expect(raise.status).toBe(403);
    }
    expect((await getJson(s.baseUrl, "/v1/organization/api_keys/team-a", auth.ops)).body.enqueued_token_limits).toEqual({ "*": 1000 });
    // The log says who the admins are, and never a secret or a hash.
    expect(logLines(s.output()).find((l) => l.msg === "API key authentication on")).toMatchObject({ keys: 4, admins: ["ops"] });
    expect(s.output()).not.toMatch(/sk-test|[0-9a-f]{64}/);
    expect((await getJson(s.baseUrl, "/v1/batches?api_key_id=nobody", auth.ops)).body.error.param).toBe("api_key_id");
    // Bad queries are refused, each naming its parameter.
    for (const [q, param] of [
      ["", "start_time"],
      [`start_time=${began}&bucket_width=2h`, "bucket_width"],
      [`start_time=${began}&group_by=project_ids`, "group_by"],
      [`start_time=${began}&project_ids=p1`, "project_ids"],
      [`start_time=${began}&bucket_width=1m&limit=1441`, "limit"],
      [`start_time=${began}&end_time=${began}`, "end_time"],
      [`start_time=${began}&page=nonsense`, "page"],
    ]) {
      const r = await getJson(s.baseUrl, `/v1/organization/usage/completions?${q}`, auth.ops);
      expect([r.status, r.body.error.param]).toEqual([400, param]);
    }
  }, 60_000);

  it("fails a batch past its key's enqueued-token limit as OpenAI does, and frees the tokens when batches end", async () => {
    // team-c's long batch holds the one slot: team-a's batches stay queued, their tokens enqueued.
    const hold = await submit(s, "team-c", 120, 100, "hold");
    const a1 = await submit(s, "team-a", 4, 100, "a1");
    const a2 = await submit(s, "team-a", 4, 100, "a2");
    const over = await submit(s, "team-a", 4, 100, "a3");
    expect(a1.status).toBe("validating");
    expect(a2.status).toBe("validating");
    expect(over.status).toBe("failed");
    expect(over.request_counts).toEqual({ completed: 0, failed: 0, total: 0 });
    expect(over.errors.data).toHaveLength(1);
    expect(over.errors.data[0]).toMatchObject({ code: "token_limit_exceeded", line: null, param: null });
    expect(over.errors.data[0].message).toMatch(
      /^Enqueued token limit reached for \S+ for API key team-a\. Limit: 1,000 enqueued tokens \(already enqueued: \d+; this batch: \d+\)\. Please try again once some in_progress batches have been completed\.$/,
    );
    expect(await getBatch(s.baseUrl, over.id, auth["team-a"])).toMatchObject({ status: "failed", output_file_id: null });
    if (python) execFileSync(python, [path.join(repoRoot, "tests/conformance/validate.py")], { input: JSON.stringify({ batch: [over] }) });
    // Anthropic's Message Batches count against the same limit: each request errored, as a rate limit.
    const anthropic = new Anthropic({ baseURL: s.baseUrl, apiKey: auth["team-a"].authorization.slice(7), maxRetries: 0 });
    const message = await anthropic.messages.batches.create({
      requests: ["m1", "m2"].map((custom_id) => ({
        custom_id,
        params: { model: "any", max_tokens: 200, messages: [{ role: "user" as const, content: "hi" }] },
      })),
    });
    expect(message).toMatchObject({ processing_status: "ended", request_counts: { errored: 2, succeeded: 0 } });
    for await (const r of await anthropic.messages.batches.results(message.id))
      expect(r.result).toMatchObject({ type: "errored", error: { error: { type: "rate_limit_error" } } });
    // Another key's limit is its own.
    expect((await submit(s, "team-b", 4, 100, "b0")).status).toBe("validating");
    const enqueued = (await getJson(s.baseUrl, "/v1/organization/api_keys/team-a", auth.ops)).body.enqueued_tokens;
    const held = Object.values(enqueued as Record<string, number>).reduce((n, t) => n + t, 0);
    expect(held).toBeGreaterThan(800);
    expect(held).toBeLessThanOrEqual(1000);
    await cancel(s, "team-c", hold.id);
    expect((await final(s, "team-a", a1.id)).status).toBe("completed");
    expect((await final(s, "team-a", a2.id)).status).toBe("completed");
    // Both ended: their tokens are free again.
    expect((await getJson(s.baseUrl, "/v1/organization/api_keys/team-a", auth.ops)).body.enqueued_tokens).toEqual({});
    expect((await final(s, "team-a", (await submit(s, "team-a", 4, 100, "a4")).id)).status).toBe("completed");
  }, 180_000);

  it("keeps a reservation across a kill -9 and frees it when the recovered batch is cancelled", async () => {
    const hold = await submit(s, "team-c", 120, 100, "hold2");
    const big = await submit(s, "team-b", 40, 100, "big");
    expect(big.status).toBe("validating");
    s.child.kill("SIGKILL");
    await s.exited;
    s = await start();
    const held = (await getJson(s.baseUrl, "/v1/organization/api_keys/team-b", auth.ops)).body.enqueued_tokens;
    expect(Object.values(held as Record<string, number>)[0]).toBeGreaterThan(4000);
    expect((await submit(s, "team-b", 40, 100, "big2")).errors.data[0].code).toBe("token_limit_exceeded");
    await cancel(s, "team-b", big.id);
    expect((await final(s, "team-b", big.id)).status).toBe("cancelled");
    expect((await getJson(s.baseUrl, "/v1/organization/api_keys/team-b", auth.ops)).body.enqueued_tokens).toEqual({});
    expect((await submit(s, "team-b", 40, 100, "big3")).status).toBe("validating");
    await cancel(s, "team-c", hold.id);
  }, 180_000);

  it("starts a key's one batch within a batch of another key's twenty, not after them", async () => {
    for (const b of (await getJson(s.baseUrl, "/v1/batches?limit=100", auth.ops)).body.data) if (!isFinal(b)) await cancel(s, "ops", b.id);
    const up = await uploadJsonl(s.baseUrl, completionJsonl(4, { prefix: "many", maxTokens: 48, temperature: 1 }), auth["team-c"]);
    const many: string[] = [];
    for (let i = 0; i < 20; i++) many.push((await createBatch(s.baseUrl, up.id, auth["team-c"])).body.id);
    const cDone = async () => {
      const all = await Promise.all(many.map((id) => getBatch(s.baseUrl, id, auth["team-c"])));
      return all.filter(isFinal).length;
    };
    const before = await cDone();
    expect(20 - before).toBeGreaterThanOrEqual(5);
    const one = await submit(s, "team-a", 2, 16, "one");
    const done = await final(s, "team-a", one.id);
    expect(done.status).toBe("completed");
    // The one running when it came, and at most one more around the claim.
    expect((await cDone()) - before).toBeLessThanOrEqual(2);
    for (const id of many) await cancel(s, "team-c", id);
    for (const id of many) await final(s, "team-c", id);
  }, 240_000);

  it("reports usage per key that adds up exactly to the batches' usage, to admins, and per-key metrics", async () => {
    const all = (await getJson(s.baseUrl, "/v1/batches?limit=100", auth.ops)).body.data;
    expect(all.every(isFinal)).toBe(true);
    const page = (
      await getJson(s.baseUrl, `/v1/organization/usage/completions?start_time=${began}&bucket_width=1h&group_by=api_key_id`, auth.ops)
    ).body;
    expect(page).toMatchObject({ object: "page", has_more: false, next_page: null });
    expect(page.data[0]).toMatchObject({ object: "bucket", start_time: began, end_time: began + 3600 });
    const reported = usageByKey(page);
    for (const key of ["team-a", "team-b", "team-c"]) {
      const mine = (await getJson(s.baseUrl, `/v1/batches?limit=100&api_key_id=${key}`, auth.ops)).body.data;
      expect(mine.length).toBeGreaterThan(0);
      // The key's own list is the same batches an admin's filter finds.
      const own = (await getJson(s.baseUrl, "/v1/batches?limit=100", auth[key])).body.data;
      expect(own.map((b: any) => b.id)).toEqual(mine.map((b: any) => b.id));
      expect(reported.get(key)).toEqual(usageOf(mine));
    }
    expect(reported.get("team-c")!.output).toBeGreaterThan(0);
    expect([...reported.keys()].sort()).toEqual(["team-a", "team-b", "team-c"]);
    // Grouped by model and batch, and filtered to one key: every result says so.
    const byModel = (
      await getJson(
        s.baseUrl,
        `/v1/organization/usage/completions?start_time=${began}&bucket_width=1h&group_by=model,batch&api_key_ids=team-a`,
        auth.ops,
      )
    ).body.data[0].results;
    expect(byModel).toHaveLength(1);
    expect(byModel[0]).toMatchObject({ object: "organization.usage.completions.result", batch: true, api_key_id: null, project_id: null });
    expect(byModel[0].input_tokens).toBe(reported.get("team-a")!.input);
    // Minute buckets page through five minutes: a next page until the end.
    const minutes = (
      await getJson(
        s.baseUrl,
        `/v1/organization/usage/completions?start_time=${began}&bucket_width=1m&end_time=${began + 300}&limit=2`,
        auth.ops,
      )
    ).body;
    expect(minutes.data).toHaveLength(2);
    expect(minutes.has_more).toBe(true);
    const next = (
      await getJson(
        s.baseUrl,
        `/v1/organization/usage/completions?start_time=${began}&bucket_width=1m&end_time=${began + 300}&limit=2&page=${minutes.next_page}`,
        auth.ops,
      )
    ).body;
    expect(next.data[0].start_time).toBe(began + 120);
    const costs = (await getJson(s.baseUrl, `/v1/organization/costs?start_time=${began}&group_by=api_key_id`, auth.ops)).body;
    // The model has no price: nothing is costed (the shape of a cost result is tests/domain/usage.unit.test.ts's).
    expect(costs).toMatchObject({ object: "page", data: [{ object: "bucket", results: [] }] });
    const embeddings = (await getJson(s.baseUrl, `/v1/organization/usage/embeddings?start_time=${began}`, auth.ops)).body;
    expect(embeddings.data[0].results).toEqual([]);
    // Each key's series go to an admin key's scrape.
    const metrics = await (await fetch(`${s.baseUrl}/metrics`, { headers: auth.ops })).text();
    expect(metrics).toMatch(/obi_key_tokens_total\{key="team-c",model="[^"]+",kind="output"\} [1-9]/);
    expect(metrics).not.toMatch(/sk-test|key_[0-9a-f]{8}/);
  }, 60_000);

  it.skipIf(!haveChromium)(
    "shows admins usage by key and every key's batches in the console, and other keys neither",
    async () => {
      const browser = await launchChromium();
      try {
        const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
        const open = async (key: string) => {
          await page.goto(s.baseUrl);
          await page.evaluate((k) => sessionStorage.setItem("obi-api-key", k), auth[key].authorization.slice("Bearer ".length));
          await page.reload();
          await page.waitForFunction(() => document.getElementById("live")?.className === "on");
        };
        await open("ops");
        await page.waitForSelector('tr.usage[data-key="team-c"]');
        const row = await page.locator('tr.usage[data-key="team-c"] td').allTextContents();
        expect(row[0]).toBe("team-c");
        const reported = usageByKey(
          (await getJson(s.baseUrl, `/v1/organization/usage/completions?start_time=${began}&group_by=api_key_id`, auth.ops)).body,
        );
        expect(row[6]).toBe(reported.get("team-c")!.output.toLocaleString("en-US"));
        expect(await page.locator('tr.usage[data-key="ops"] td').first().textContent()).toBe("ops (admin)");
        // The admin's list holds other keys' batches, each with its key, and filters by key.
        const teamA = (await getJson(s.baseUrl, "/v1/batches?limit=1", auth["team-a"])).body.data[0].id;
        const teamC = (await getJson(s.baseUrl, "/v1/batches?limit=1", auth["team-c"])).body.data[0].id;
        await page.waitForSelector(`tr.batch[data-id="${teamA}"]`);
        expect(await page.locator(`tr.batch[data-id="${teamA}"] td.key-col`).innerText()).toBe("team-a");
        expect(await page.locator("#f-key").isVisible()).toBe(true);
        await page.selectOption("#f-key", "team-c");
        await page.waitForFunction((id) => !document.querySelector(`tr.batch[data-id="${id}"]`), teamA);
        await page.waitForSelector(`tr.batch[data-id="${teamC}"]`);
        expect(await page.locator("tr.batch td.key-col").evaluateAll((tds) => [...new Set(tds.map((td) => td.textContent))])).toEqual([
          "team-c",
        ]);
        // Desktop width: the table fits its box, no inner scroll.
        const widths = await page.evaluate(() => ({
          table: document.getElementById("batch-table")!.getBoundingClientRect().width,
          box: (document.querySelector("#batches .table-wrap") as HTMLElement).clientWidth,
        }));
        expect(widths.table).toBeLessThanOrEqual(widths.box);
        await open("team-a");
        await page.waitForSelector(`tr.batch[data-id="${teamA}"]`);
        expect(await page.locator("#usage").isVisible()).toBe(false);
        // A key's own list spans no keys: no key column, no key filter.
        expect(await page.locator("#f-key").isVisible()).toBe(false);
        expect(await page.locator(`tr.batch[data-id="${teamC}"]`).count()).toBe(0);
      } finally {
        await browser.close();
      }
    },
    60_000,
  );
});
