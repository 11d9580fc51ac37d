// The console at / in a real headless Chromium: the batch list with filters and search, a batch's page with its
// timeline, reason, downloads, cancel and retry, the live charts, the models view, the keyboard, and a page that
// fits from a phone to a desktop. Screenshots go to $CONSOLE_SCREENSHOTS (docs/console.md's) or the temp folder.
import { mkdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testModelName } from "../../testkit/model.js";
import { completionJsonl } from "../../testkit/workload.js";
import { haveChromium, launchChromium, openConsole } from "../helpers/browser.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, startTestService, type TestService, waitForBatch } from "../helpers/service.js";

const SHOTS = process.env.CONSOLE_SCREENSHOTS ?? path.join(os.tmpdir(), "obi-screens");

let svc: TestService;
let browser: Browser;
const ids: Record<string, string> = {};

async function create(jsonl: string, metadata: Record<string, string>, filename: string) {
  const file = await uploadJsonl(svc.baseUrl, jsonl, {}, filename);
  return openaiClient(svc).batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h", metadata });
}

beforeAll(async () => {
  if (!haveChromium) return;
  // One context: the long batch need only run, and so it takes one core at most from the rest of the run.
  svc = await startTestService({ SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0", CONTEXTS: "1" });
  browser = await launchChromium();
  ids.done = (await create(completionJsonl(4, { prefix: "ok", maxTokens: 4 }), { project: "nightly-eval" }, "eval-set.jsonl")).id;
  await waitForBatch(svc.baseUrl, ids.done);
  ids.failed = (await create("not json\n{}\n", { project: "broken" }, "broken.jsonl")).id;
  ids.long = (await create(completionJsonl(2000, { prefix: "long", maxTokens: 256 }), { project: "labels" }, "labels.jsonl")).id;
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await svc?.close();
});

const open = (width: number, hash = ""): Promise<Page> => openConsole(browser, svc.baseUrl, width, hash, true);

const pageWidth = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth);

describe.skipIf(!haveChromium)("the console in a browser", () => {
  it("lists batches with model, file, metadata and times; filters by status; searches metadata; fits 1,280 px", async () => {
    const page = await open(1280);
    await page.waitForSelector(`tr.batch[data-id="${ids.long}"]`);
    const done = await page.locator(`tr.batch[data-id="${ids.done}"]`).innerText();
    expect(done).toMatch(/eval-set\.jsonl · project=nightly-eval/);
    expect(done).toMatch(new RegExp(`${await testModelName()}[\\s\\S]*completed[\\s\\S]*4 / 4 \\(100%\\)[\\s\\S]*spot[\\s\\S]*met`));
    await page.waitForSelector(`tr.batch[data-id="${ids.long}"] .rate`, { timeout: 20_000 });
    // The ETA is the API's projection, which waits for a sample (20 lines and 30 s here) before it says anything.
    expect(await page.locator(`tr.batch[data-id="${ids.long}"] .rate`).innerText()).toMatch(/^(\d+ tok\/s|measuring…) · ETA estimating…$/);
    await page.selectOption("#f-status", "failed");
    await page.waitForFunction(() =>
      [...document.querySelectorAll("tr.batch")].every((r) => (r as HTMLElement).dataset.status === "failed"),
    );
    expect(await page.locator("tr.batch").count()).toBe(1);
    // A failed batch says why in the list too, and shows no deadline still ahead of it.
    expect(await page.locator("tr.batch").first().innerText()).toMatch(/failed\s+line 1: [\s\S]*—/);
    await page.selectOption("#f-status", "");
    await page.fill("#f-q", "nightly");
    await page.waitForFunction(
      (id) => document.querySelectorAll("tr.batch").length === 1 && document.querySelector(`tr.batch[data-id="${id}"]`),
      ids.done,
    );
    await page.fill("#f-q", "project=nightly-eval");
    await page.waitForFunction(
      (id) => document.querySelectorAll("tr.batch").length === 1 && document.querySelector(`tr.batch[data-id="${id}"]`),
      ids.done,
    );
    // A metadata entry matches whole, not a part of its value.
    await page.fill("#f-q", "project=nightly");
    await page.waitForSelector("#empty-filtered:not(.hidden)");
    expect(await page.locator("#empty").innerText()).toMatch(/No batches match these filters/);
    await page.click("#clear-filters");
    await page.waitForFunction(() => document.querySelectorAll("tr.batch").length === 3);
    expect(await page.inputValue("#f-q")).toBe("");
    expect(await pageWidth(page)).toBe(1280);
    // A pool of no capacity (DEDICATED_CAPACITY=0) says so rather than "idle".
    expect(await page.locator("#pool-dedicated").innerText()).toMatch(/0 \/ 0[\s\S]*no slots$/);
    await page.waitForSelector("#chart-tokens canvas");
    // The charts draw what the service sampled: a point at start, then one every 5 s, while the long batch runs.
    const series = async () => (await (await fetch(`${svc.baseUrl}/console/api/series`)).json()).points;
    while ((await series()).length < 3) await new Promise((r) => setTimeout(r, 500));
    expect((await series()).some((p: { tokens_per_second: number }) => p.tokens_per_second > 0)).toBe(true);
    await page.waitForTimeout(5_500);
    expect(await page.locator(`tr.model[data-model="${await testModelName()}"]`).innerText()).toMatch(/local[\s\S]*loaded[\s\S]*\d+ MB/);
    mkdirSync(SHOTS, { recursive: true });
    await page.screenshot({ path: path.join(SHOTS, "console-desktop.png"), fullPage: true });
    await page.close();
  }, 60_000);

  it("keeps focus and a selection through refreshes: the batches' and the models' rows are updated in place", async () => {
    const page = await open(1280);
    const link = `tr.batch[data-id="${ids.long}"] a.open`;
    await page.waitForSelector(link);
    await page.focus(link);
    await page.evaluate((sel) => {
      const code = document.querySelector(`${sel} code`)!;
      const range = document.createRange();
      range.selectNodeContents(code);
      getSelection()!.removeAllRanges();
      getSelection()!.addRange(range);
    }, link);
    const stamp = async () => page.locator("#live").innerText();
    const refreshes = async (n: number) => {
      for (let seen = 0, last = await stamp(); seen < n; ) {
        await page.waitForTimeout(300);
        const now = await stamp();
        if (now !== last) [seen, last] = [seen + 1, now];
      }
    };
    await refreshes(5);
    expect(await page.evaluate((sel) => document.activeElement === document.querySelector(sel), link)).toBe(true);
    expect(await page.evaluate(() => getSelection()!.toString())).toBe(ids.long);
    // The models' table alike: the row is the same element after the refreshes, its selected name still selected.
    await page.evaluate(() => {
      const row = document.querySelector("tr.model") as HTMLTableRowElement & { kept?: boolean };
      row.kept = true;
      const range = document.createRange();
      range.selectNodeContents(row.cells[0]);
      getSelection()!.removeAllRanges();
      getSelection()!.addRange(range);
    });
    await refreshes(3);
    expect(await page.evaluate(() => (document.querySelector("tr.model") as HTMLElement & { kept?: boolean }).kept)).toBe(true);
    expect(await page.evaluate(() => getSelection()!.toString())).toBe(await testModelName());
    await page.close();
  }, 60_000);

  it("fits a phone and a wide screen: at 390 and 360 px each batch is a card with status and progress first, nothing scrolls sideways", async () => {
    for (const width of [390, 360, 1920]) {
      const page = await open(width);
      await page.waitForSelector(`tr.batch[data-id="${ids.done}"]`);
      expect(await pageWidth(page)).toBe(width);
      const wrap = await page.locator("#batches .table-wrap").evaluate((e) => ({ client: e.clientWidth, scroll: e.scrollWidth }));
      expect(wrap.client).toBeLessThanOrEqual(width);
      if (width < 600) {
        expect(wrap.scroll).toBeLessThanOrEqual(wrap.client);
        const row = page.locator(`tr.batch[data-id="${ids.done}"]`);
        const box = async (sel: string) => (await row.locator(sel).boundingBox())!;
        const [status, progress, id] = [await box("td.status"), await box("td.progress"), await box("td.id")];
        expect(status.y).toBeLessThan(progress.y);
        expect(progress.y).toBeLessThan(id.y);
        for (const b of [status, progress, id]) expect(b.x + b.width).toBeLessThanOrEqual(width);
        expect(await row.locator("td.status").innerText()).toMatch(/^completed/);
      }
      if (width === 390) await page.locator("#batches").screenshot({ path: path.join(SHOTS, "console-phone.png") });
      await page.close();
    }
  }, 60_000);

  it("shows a batch refused at validation with its file's problems by line, and no failed line", async () => {
    const page = await open(1280, `#batch/${ids.failed}`);
    await page.waitForSelector("#b-reason-card:not(.hidden)");
    expect(await page.locator("#b-reason").innerText()).toMatch(/^line 1: /);
    expect(await page.locator("#b-progress").innerText()).toMatch(/^Refused at validation: no request ran/);
    expect(await page.locator("#b-errors-card").isHidden()).toBe(true);
    expect(await page.locator("#b-timeline").innerText()).toMatch(/created[\s\S]*failed/);
    await page.close();
  });

  it("shows what ran with no key configured as the open API's usage, not an empty table", async () => {
    const page = await open(1280);
    await page.waitForSelector('tr.usage[data-key="—"]', { timeout: 15_000 });
    const cells = await page.locator('tr.usage[data-key="—"] td').allTextContents();
    expect(cells[0]).toBe("open API (no key)");
    // The finished batch's four requests at least (the usage API's figures under api_key_id: null).
    expect(Number(cells[3].replace(/\D/g, ""))).toBeGreaterThanOrEqual(4);
    // The model has no price: nothing was spent.
    expect(cells[7]).toBe("0.0000");
    await page.close();
  });

  it("shows the synchronous lanes beside the batches: each tier's room, queue, and the requests served", async () => {
    const client = openaiClient(svc);
    await client.completions.create({ model: "any", prompt: "Once upon a time", max_tokens: 4 });
    await client.completions.create({ model: "any", prompt: "Once upon a time", max_tokens: 4, service_tier: "flex" } as never);
    const page = await open(1280, "#lanes");
    await page.waitForSelector("tr.lane", { timeout: 15_000 });
    expect(await page.locator("#no-lanes").isHidden()).toBe(true);
    // Each cell's text, not the row's innerText: that is tab-separated only while the row is laid out as a table's.
    const rows = await page.$$eval("tr.lane", (trs) =>
      trs.map((tr) => Array.from((tr as HTMLTableRowElement).cells, (c) => c.textContent ?? "")),
    );
    const row = (tier: RegExp) => rows.find((cells) => tier.test(cells[1])) ?? [];
    const interactive = row(/interactive/);
    expect(interactive[0]).toBe(await testModelName());
    expect(interactive[2]).toMatch(/^\d+ \/ [1-9]\d*$/);
    expect(Number(interactive[4])).toBeGreaterThanOrEqual(1);
    expect(row(/flex/)[3]).toMatch(/^\d+ \/ 256$/);
    await page.close();
  });

  it("downloads the output from the page, and opens a batch from the list with the keyboard", async () => {
    const page = await open(1280);
    await page.waitForSelector(`tr.batch[data-id="${ids.done}"] a.open`);
    await page.focus(`tr.batch[data-id="${ids.done}"] a.open`);
    await page.keyboard.press("Enter");
    await page.waitForFunction((id) => document.getElementById("b-id")?.textContent === id, ids.done);
    // The row's link is hidden now: focus is on the batch's heading, not thrown back to <body>.
    await page.waitForFunction(() => document.activeElement?.id === "b-title");
    await page.keyboard.press("Tab");
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Download input");
    expect(await page.locator("#b-facts").innerText()).toMatch(/eval-set\.jsonl[\s\S]*project=nightly-eval[\s\S]*spot/);
    // Its engine time by pool, as the batch reports it; no cost without a price in a models file.
    const batch = await openaiClient(svc).batches.retrieve(ids.done);
    const e = (batch as unknown as { engine_seconds: { spot: number; dedicated: number } }).engine_seconds;
    expect(await page.locator("#b-facts").innerText()).toContain(
      `Engine time\n${e.spot.toFixed(1)} s spot · ${e.dedicated.toFixed(1)} s dedicated\nCost\n—`,
    );
    const [dl] = await Promise.all([page.waitForEvent("download"), page.click("#b-dl-output")]);
    const lines = readFileSync(await dl.path(), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.custom_id).sort()).toEqual(["ok-0", "ok-1", "ok-2", "ok-3"]);
    expect(dl.suggestedFilename()).toBe(`${ids.done}_output.jsonl`);
    await page.close();
  });

  it("cancels with a confirmation, then retries the lines the cancel left unrun", async () => {
    const page = await open(1280, `#batch/${ids.long}`);
    await page.waitForFunction(() => !(document.getElementById("b-cancel") as HTMLButtonElement).disabled);
    await page.click("#b-cancel");
    await page.waitForSelector("dialog#confirm[open]");
    await page.click("#confirm-no");
    expect((await openaiClient(svc).batches.retrieve(ids.long)).status).toBe("in_progress");
    await page.click("#b-cancel");
    await page.click("#confirm-yes");
    await page.waitForFunction(() => /Cancel sent/.test(document.getElementById("b-action-result")?.textContent ?? ""));
    const cancelled = await waitForBatch(svc.baseUrl, ids.long);
    expect(cancelled.status).toBe("cancelled");
    await page.waitForFunction(() => !(document.getElementById("b-retry") as HTMLButtonElement).disabled, undefined, { timeout: 10_000 });
    // The lines the cancel left unrun: "not run", grey, each with its line in the input.
    await page.waitForSelector("#b-errors tr.line-error.not-run");
    const unrun = await page.$eval("#b-errors tr.not-run", (tr) =>
      Array.from((tr as HTMLTableRowElement).cells, (c) => c.textContent ?? ""),
    );
    const [line, , customId] = unrun;
    expect(Number(line)).toBe(Number(customId.replace("long-", "")) + 1);
    expect(unrun.join("\t")).toMatch(/not run[\s\S]*batch_cancelled/);
    expect(await page.locator("#b-progress").innerText()).toMatch(new RegExp(`0 failed · ${cancelled.request_counts.failed} not run`));
    await page.screenshot({ path: path.join(SHOTS, "console-batch.png") });
    const phone = await open(390, `#batch/${ids.long}`);
    await phone.waitForSelector("#b-errors tr.not-run");
    // Measured in one evaluation, as the rows read above: a refresh replaces them.
    const width = await phone.$eval("#b-errors tr.not-run td.message", (td) => td.getBoundingClientRect().width);
    expect(width).toBeGreaterThan(250);
    await phone.screenshot({ path: path.join(SHOTS, "console-batch-phone.png"), fullPage: false });
    await phone.close();
    await page.click("#b-retry");
    await page.click("#confirm-yes");
    await page.waitForFunction((old) => /^#batch\/batch_/.test(location.hash) && !location.hash.endsWith(old), ids.long);
    const retryId = (await page.evaluate(() => location.hash)).slice("#batch/".length);
    const retry = await openaiClient(svc).batches.retrieve(retryId);
    expect(retry.metadata).toEqual({ project: "labels", retry_of: ids.long });
    expect(retry.request_counts?.total).toBe(cancelled.request_counts.failed);
    await page.close();
  }, 90_000);
});

describe.skipIf(!haveChromium)("the console with API keys", () => {
  it("asks for a key, keeps it in the tab, and shows that key's batches only", async () => {
    const keyed = await startTestService({ API_KEYS: "alpha,beta" });
    try {
      const file = await uploadJsonl(keyed.baseUrl, completionJsonl(1, { prefix: "k" }), { authorization: "Bearer alpha" });
      const res = await fetch(`${keyed.baseUrl}/v1/batches`, {
        method: "POST",
        headers: { authorization: "Bearer alpha", "content-type": "application/json" },
        body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" }),
      });
      const mine = (await res.json()).id;
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      await page.goto(keyed.baseUrl);
      await page.waitForSelector("#keyform.show");
      // It asks for the key; it does not claim there are no batches.
      expect(await page.locator("#empty").isVisible()).toBe(false);
      await page.fill("#key", "beta");
      await page.press("#key", "Enter");
      await page.waitForFunction(() => document.getElementById("live")?.className === "on");
      expect(await page.locator("tr.batch").count()).toBe(0);
      await page.evaluate(() => sessionStorage.setItem("obi-api-key", "alpha"));
      await page.reload();
      await page.waitForSelector(`tr.batch[data-id="${mine}"]`);
      await page.close();
    } finally {
      await keyed.close();
    }
  }, 60_000);
});
