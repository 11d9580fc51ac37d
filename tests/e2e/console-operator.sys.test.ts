// The console as an operator watching batches finds it, in a real headless Chromium at 1,280 and 390 px, on the
// service's own generated model (as a first start runs): the batch table fits with every kind of status in it, the
// charts' value labels fit whatever the peak, a batch's page names the service and keeps no stale result, a cancelled
// batch's page and shards say what ran and what never did, a batch that ended is never shown paused, and a preempted
// spot pool says so (never idle). Screenshots go to the temp folder.
import { mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionJsonl } from "../../testkit/workload.js";
import { haveChromium, launchChromium, openConsole, tableFit } from "../helpers/browser.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, startTestService, type TestService, waitForBatch } from "../helpers/service.js";

// Only to look at: the pictures of docs/console.md are the other console tests' (CONSOLE_SCREENSHOTS=docs).
const SHOTS = path.join(os.tmpdir(), "obi-screens");
const WIDTHS = [1280, 390];

let svc: TestService;
let browser: Browser;
const ids: Record<string, string> = {};

async function create(jsonl: string, filename: string, metadata?: Record<string, string>) {
  const file = await uploadJsonl(svc.baseUrl, jsonl, {}, filename);
  return (
    await openaiClient(svc).batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", metadata })
  ).id;
}

const post = async (route: string) => {
  const res = await fetch(`${svc.baseUrl}${route}`, { method: "POST" });
  expect(res.status, route).toBe(200);
  return res.json();
};

beforeAll(async () => {
  if (!haveChromium) return;
  // The generated model (MODEL_PATH empty), as `npm start` runs with nothing set; a long cooldown keeps a
  // preemption on screen while the test looks.
  svc = await startTestService({ MODEL_PATH: "", SPOT_CAPACITY: "2", DEDICATED_CAPACITY: "1", SPOT_PREEMPT_COOLDOWN_SECONDS: "900" });
  browser = await launchChromium();
  ids.done = await create(completionJsonl(3, { prefix: "ok", maxTokens: 4 }), "customer_support_tickets_2024_q3_labelled.jsonl", {
    project: "nightly-eval",
    owner: "data-team",
  });
  await waitForBatch(svc.baseUrl, ids.done);
  ids.refused = await create("not json\n{}\n", "broken.jsonl");
  ids.cancelled = await create(completionJsonl(50, { prefix: "c", maxTokens: 256 }), "cancel-me.jsonl");
  await post(`/v1/batches/${ids.cancelled}/cancel`);
  ids.running = await create(completionJsonl(2000, { prefix: "run", maxTokens: 256 }), "labels.jsonl", { project: "labels" });
  ids.paused = await create(completionJsonl(2000, { prefix: "pz", maxTokens: 256 }), "held.jsonl");
  await post(`/v1/batches/${ids.paused}/pause`);
  await waitForBatch(svc.baseUrl, ids.cancelled);
  await waitForBatch(svc.baseUrl, ids.refused);
  mkdirSync(SHOTS, { recursive: true });
}, 120_000);
afterAll(async () => {
  for (const id of [ids.running, ids.paused]) if (id) await fetch(`${svc.baseUrl}/v1/batches/${id}/cancel`, { method: "POST" });
  await browser?.close();
  await svc?.close();
});

const open = (width: number, hash = ""): Promise<Page> => openConsole(browser, svc.baseUrl, width, hash);

const pageWidth = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth);
const shown = (page: Page, sel: string) => page.locator(sel).evaluate((e) => (e as HTMLElement).offsetParent !== null);

/** Pixels drawn in a chart canvas's two leftmost columns: a value label wider than its axis is cut there. */
const inkAtLeftEdge = (page: Page, id: string) =>
  page.evaluate((chart) => {
    const canvas = document.querySelector(`#${chart} canvas`) as HTMLCanvasElement;
    const data = canvas.getContext("2d")!.getImageData(0, 0, 2, canvas.height).data;
    let ink = 0;
    for (let i = 3; i < data.length; i += 4) if (data[i] > 0) ink++;
    return ink;
  }, id);

/** Lines each part of the model cells' names takes (between its "-", "_", "." and "/"): one, if no part is broken. */
const modelPartLines = (page: Page) =>
  page.locator("#batch-rows td.model").evaluateAll((cells) =>
    cells.flatMap((td) =>
      [...td.childNodes]
        .filter((n) => n.nodeType === Node.TEXT_NODE)
        .map((n) => {
          const range = document.createRange();
          range.selectNodeContents(n);
          return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
        }),
    ),
  );

describe.skipIf(!haveChromium)("the console as an operator watching batches finds it", () => {
  it("fits the batch table in 1,280 px with every kind of status, each Times line whole, and cards on a phone", async () => {
    const page = await open(1280);
    for (const id of Object.values(ids)) await page.waitForSelector(`tr.batch[data-id="${id}"]`);
    await page.waitForSelector(`tr.batch[data-id="${ids.paused}"] .badge.paused`);
    await page.waitForSelector(`tr.batch[data-id="${ids.running}"] .rate`, { timeout: 20_000 });
    const sizes = await tableFit(page.locator("#batches .table-wrap"));
    expect(sizes.scroll, "the table scrolls inside the page").toBeLessThanOrEqual(sizes.client);
    expect(sizes.narrowest).toBeLessThanOrEqual(sizes.client);
    for (const line of await page
      .locator("#batch-rows td.times div")
      .evaluateAll((divs) => divs.map((d) => d.getBoundingClientRect().right)))
      expect(line).toBeLessThanOrEqual(sizes.right);
    expect(await pageWidth(page)).toBe(1280);
    // A model's name wraps only between its parts: "stories260K" never reads "stories260 / K".
    expect(new Set(await modelPartLines(page))).toEqual(new Set([1]));
    await page.locator("#batches").screenshot({ path: path.join(SHOTS, "console-operator-list-1280.png") });
    await page.close();

    const phone = await open(390);
    await phone.waitForSelector(`tr.batch[data-id="${ids.paused}"] .badge.paused`);
    expect(await pageWidth(phone)).toBe(390);
    await phone.locator("#batches").screenshot({ path: path.join(SHOTS, "console-operator-list-390.png") });
    await phone.close();
  }, 60_000);

  it("labels each chart's values within its axis at a peak of 11,517 tokens/s and a time at its left edge, and counts in whole numbers", async () => {
    for (const width of WIDTHS) {
      const page = await browser.newPage({ viewport: { width, height: 900 } });
      // The series as the service sends it, its newest point raised to the operator's peak.
      await page.route("**/console/api/series", async (route) => {
        const res = await route.fetch();
        const body = await res.json();
        const last = body.points.at(-1);
        Object.assign(last, { tokens_per_second: 11_517, requests_per_second: 1_234.5, queue_depth: 3 });
        // Slots in use between 0 and 1: a count's axis once read "0, 0.5, 1".
        const idle = structuredClone(last);
        Object.assign(idle, { t: last.t - 1, queue_depth: 0 });
        for (const pool of Object.values(idle.pools) as Array<{ in_use: number }>) pool.in_use = 0;
        for (const pool of Object.values(last.pools) as Array<{ in_use: number }>) pool.in_use = 1;
        body.points.splice(-1, 0, idle);
        // The newest sample a second before a labelled time: the oldest time label then sits at the plot's left edge.
        const shift = 299 - (last.t % 300);
        for (const point of body.points) point.t += shift;
        await route.fulfill({ response: res, json: body });
      });
      await page.goto(`${svc.baseUrl}/#charts`);
      await page.waitForFunction(() => /now 11517$/.test(document.getElementById("chart-tokens")?.getAttribute("aria-label") ?? ""));
      await page.waitForSelector("#chart-pools canvas");
      for (const id of ["chart-tokens", "chart-requests", "chart-queue", "chart-pools"])
        expect(await inkAtLeftEdge(page, id), `${id} at ${width} px: ${await page.locator(`#${id}`).getAttribute("data-values")}`).toBe(0);
      expect(await page.locator("#chart-tokens").getAttribute("data-values")).toMatch(/10/);
      // Counts (batches queued, slots in use) are ticked in whole numbers: never "0.5" slots.
      for (const id of ["chart-queue", "chart-pools"])
        expect(await page.locator(`#${id}`).getAttribute("data-values")).toMatch(/^[\dK ]+$/);
      await page.locator("#charts").screenshot({ path: path.join(SHOTS, `console-operator-charts-${width}.png`) });
      await page.close();
    }
  }, 60_000);

  it("keeps no stale result after a cancel, shows what ran and what was cancelled, and names the service on a batch's page opened directly", async () => {
    const page = await open(1280, `#batch/${ids.running}`);
    await page.waitForFunction((id) => document.getElementById("b-id")?.textContent === id, ids.running);
    await page.click("#b-cancel");
    await page.click("#confirm-yes");
    await page.waitForFunction(() => document.getElementById("b-status")?.textContent === "cancelled", undefined, { timeout: 30_000 });
    // What the cancel said is replaced by how it ended, never left saying it is cancelling.
    await page.waitForFunction(() => /^Cancelled: /.test(document.getElementById("b-action-result")?.textContent ?? ""));
    const result = await page.locator("#b-action-result").innerText();
    const { request_counts } = await openaiClient(svc).batches.retrieve(ids.running);
    expect(result).toMatch(new RegExp(`^Cancelled: ${request_counts!.completed} completed · \\d+ failed · \\d+ not run\\.$`));
    await page.waitForTimeout(1_500);
    expect(await page.locator("#b-action-result").innerText()).toBe(result);
    // What ran and what the cancel left: no share of 100%, no shard "done" with every line counted.
    expect(await page.locator("#b-progress").innerText()).not.toMatch(/%/);
    for (const row of await page.locator("#b-shards tr").allInnerTexts()) {
      expect(row).not.toMatch(/done|(\d+) \/ \1/);
      expect(row).toMatch(/cancelled[\s\S]*\d+ completed · (\d+ failed · )?\d+ not run · of \d+$/);
    }
    // Opened at its own address, the page's header names the service's version and model as the home page's does.
    const model = (await openaiClient(svc).batches.retrieve(ids.running)).model;
    expect(await page.locator("#model").innerText()).toMatch(new RegExp(`^v\\d+\\.\\d+\\.\\d+ · model ${model}$`));
    await page.screenshot({ path: path.join(SHOTS, "console-operator-cancelled-1280.png") });
    // It speaks of that batch only: another batch's page opened next does not say it.
    await page.evaluate((id) => {
      location.hash = `#batch/${id}`;
    }, ids.done);
    await page.waitForFunction((id) => document.getElementById("b-id")?.textContent === id, ids.done);
    expect(await page.locator("#b-action-result").innerText()).toBe("");
    await page.close();
  }, 60_000);

  it("never shows a batch that ended as paused: no paused badge, no Pause or Resume, on its page and in the list", async () => {
    await post(`/v1/batches/${ids.paused}/cancel`);
    await waitForBatch(svc.baseUrl, ids.paused);
    for (const width of WIDTHS) {
      const page = await open(width, `#batch/${ids.paused}`);
      await page.waitForFunction((id) => document.getElementById("b-id")?.textContent === id, ids.paused);
      expect(await page.locator("#b-status").innerText()).toBe("cancelled");
      expect(await shown(page, "#b-pause")).toBe(false);
      expect(await shown(page, "#b-resume")).toBe(false);
      await page.screenshot({ path: path.join(SHOTS, `console-operator-ended-paused-${width}.png`) });
      await page.close();
      const list = await open(width);
      const row = list.locator(`tr.batch[data-id="${ids.paused}"]`);
      await row.waitFor();
      expect(await row.locator(".badge.paused").count()).toBe(0);
      expect(await row.innerText()).not.toMatch(/paused/);
      await list.close();
    }
  }, 60_000);

  it("keeps a long model name with no hyphen inside the page: the header, the models and the batch table", async () => {
    const LONG = "qwen2_5_coder_32b_instruct_abliterated_uncensored_q4_k_m_imatrix_v3";
    const rename = (text: string) =>
      text.replace(/"model":"[^"]+"/g, `"model":"${LONG}"`).replace(/"name":"tiny[^"]*"/g, `"name":"${LONG}"`);
    for (const width of WIDTHS) {
      const page = await browser.newPage({ viewport: { width, height: 900 } });
      for (const route of ["**/console/api/overview", "**/console/api/batches?*"])
        await page.route(route, async (r) => {
          const res = await r.fetch();
          await r.fulfill({ response: res, body: rename(await res.text()) });
        });
      await page.goto(svc.baseUrl);
      await page.waitForFunction((m) => document.getElementById("model")?.textContent?.endsWith(m), LONG);
      await page.waitForSelector(`tr.batch[data-id="${ids.done}"]`);
      await page.waitForSelector("tr.model");
      expect(await page.locator(`tr.batch[data-id="${ids.done}"] td.model`).innerText()).toContain(LONG.slice(0, 10));
      expect(await pageWidth(page), `the page at ${width} px`).toBe(width);
      if (width === 1280) {
        const sizes = await tableFit(page.locator("#batches .table-wrap"));
        expect(sizes.narrowest).toBeLessThanOrEqual(sizes.client);
      }
      expect(new Set(await modelPartLines(page))).toEqual(new Set([1]));
      await page.screenshot({ path: path.join(SHOTS, `console-operator-long-model-${width}.png`) });
      await page.close();
    }
  }, 60_000);

  it("reads a preempted spot pool as preempted, with its slots and when they are back, never idle", async () => {
    const preemption = await post("/pools/spot/preempt");
    const spot = (await (await fetch(`${svc.baseUrl}/console/api/overview`)).json()).pools.find((p: { name: string }) => p.name === "spot");
    expect(spot).toMatchObject({ capacity: 2, preempted: 2, available: 0 });
    expect(spot.preempted_until).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000) + preemption.cooldown_seconds - 5);
    const back = new Date(spot.preempted_until * 1000);
    for (const width of WIDTHS) {
      const page = await open(width);
      await page.waitForFunction(() => /preempted/.test(document.getElementById("pool-spot")?.textContent ?? ""));
      const card = await page.locator("#pool-spot").innerText();
      expect(card).not.toMatch(/idle/);
      const clock = await page.evaluate((t) => new Date(t).toLocaleTimeString(), back.getTime());
      expect(card).toContain(`preempted: 2 of 2 slots, back at ${clock} (in 1`);
      const box = (await page.locator("#pool-spot").boundingBox())!;
      expect(box.x + box.width).toBeLessThanOrEqual(width);
      await page.locator("#cards").screenshot({ path: path.join(SHOTS, `console-operator-preempted-${width}.png`) });
      await page.close();
    }
  }, 60_000);
});
