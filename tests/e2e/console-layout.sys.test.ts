// The console's pages as a first visitor sees them, in a real headless Chromium at 1,280 and 390 px: charts that label
// the times they span and name their series in the page's own legend, sections with nothing to show saying so
// instead of bare table headers, a long model name that fits a phone, and a batch refused at validation read as
// refused (no request ran), not as a failed line. Screenshots go to the temp folder.
import { mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testModelPath } from "../../testkit/model.js";
import { completionJsonl } from "../../testkit/workload.js";
import { haveChromium, launchChromium, openConsole } from "../helpers/browser.js";
import { uploadJsonl } from "../helpers/http-batches.js";
import { scratchDir } from "../helpers/scratch.js";
import { openaiClient, startTestService, type TestService, waitForBatch } from "../helpers/service.js";

// Only to look at: the pictures of docs/console.md are the other console tests' (CONSOLE_SCREENSHOTS=docs).
const SHOTS = path.join(os.tmpdir(), "obi-screens");
/** 35 characters, as a real model's file name can be. */
const LONG_NAME = "qwen2.5-7b-instruct-q4_k_m-stories1";

const scratch = scratchDir("console-layout");
let svc: TestService;
let browser: Browser;
const ids: Record<string, string> = {};

async function create(jsonl: string, filename: string) {
  const file = await uploadJsonl(svc.baseUrl, jsonl, {}, filename);
  return openaiClient(svc).batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" });
}

beforeAll(async () => {
  if (!haveChromium) return;
  const models = await scratch.write(
    `models:\n  - name: ${LONG_NAME}\n    local: { path: ${JSON.stringify(await testModelPath())} }\n`,
    "models.yaml",
  );
  svc = await startTestService({ MODEL_PATH: "", MODELS_FILE: models, SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "1" });
  browser = await launchChromium();
  ids.done = (await create(completionJsonl(3, { prefix: "ok", maxTokens: 4 }), "fine.jsonl")).id;
  await waitForBatch(svc.baseUrl, ids.done);
  // Line 1 is a good request, line 2 is not JSON: the file is refused as a whole, before any request runs.
  ids.refused = (await create(`${completionJsonl(1, { prefix: "r" })}not json\n`, "broken.jsonl")).id;
  mkdirSync(SHOTS, { recursive: true });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await svc?.close();
});

const open = (width: number, hash = ""): Promise<Page> => openConsole(browser, svc.baseUrl, width, hash);

const shown = (page: Page, sel: string) => page.locator(sel).evaluate((e) => (e as HTMLElement).offsetParent !== null);

describe.skipIf(!haveChromium)("the console's pages as a first visitor sees them", () => {
  it("labels each chart's 15 minutes with several times, and names the pool chart's series in a legend of its own", async () => {
    const page = await open(1280);
    await page.waitForSelector("#chart-pools canvas");
    for (const id of ["chart-tokens", "chart-requests", "chart-queue", "chart-pools"]) {
      await page.waitForFunction((i) => document.getElementById(i)?.dataset.times, id);
      const times = (await page.locator(`#${id}`).getAttribute("data-times"))!.split(" ");
      expect(times.length, `${id}: ${times.join(" ")}`).toBeGreaterThanOrEqual(3);
    }
    // uPlot's own legend (a table of "Time", values and dashes) is not shown; the page's names each pool.
    expect(await page.locator("#chart-pools .u-legend").count()).toBe(0);
    expect(await page.locator("#chart-pools-legend").innerText()).toMatch(/spot[\s\S]*dedicated/);
    await page.locator("#charts").screenshot({ path: path.join(SHOTS, "console-charts.png") });
    await page.close();
  });

  it("says so where a section has nothing to show, with no bare table headers", async () => {
    const page = await open(1280);
    await page.waitForSelector(`tr.batch[data-id="${ids.done}"]`);
    // No upstream models and no synchronous request yet: a sentence each, no empty table.
    expect(await shown(page, "#no-upstreams")).toBe(true);
    expect(await shown(page, "#upstream-table")).toBe(false);
    expect(await shown(page, "#no-lanes")).toBe(true);
    expect(await shown(page, "#lane-table")).toBe(false);
    await page.fill("#f-q", "nothing-matches-this");
    await page.waitForSelector("#empty-filtered:not(.hidden)");
    expect(await shown(page, "#batch-table")).toBe(false);
    await page.screenshot({ path: path.join(SHOTS, "console-empty-1280.png"), fullPage: true });
    await page.close();
  });

  it("fits a 35-character model name on a 390 px phone: the models table does not overflow", async () => {
    const page = await open(390, "#models");
    await page.waitForSelector(`tr.model[data-model="${LONG_NAME}"]`);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    const wrap = await page.locator("#models .table-wrap").evaluate((e) => ({ client: e.clientWidth, scroll: e.scrollWidth }));
    expect(wrap.scroll).toBeLessThanOrEqual(wrap.client);
    // Measured in one evaluation: a refresh replaces the rows, and a row found before it is measured after it detached.
    const right = await page.$eval(`tr.model[data-model="${LONG_NAME}"] td`, (td) => td.getBoundingClientRect().right);
    expect(right).toBeLessThanOrEqual(390);
    expect(await page.locator(`tr.model[data-model="${LONG_NAME}"]`).innerText()).toContain(LONG_NAME);
    await page.locator("#models").screenshot({ path: path.join(SHOTS, "console-models-phone.png") });
    await page.close();
  });

  it("says how many of a batch's lines were answered from cache, and nothing of it where none was", async () => {
    const same = completionJsonl(4, { prefix: "same", model: LONG_NAME, maxTokens: 4, prompt: () => "Once upon a time, one story:" });
    const repeats = await waitForBatch(svc.baseUrl, (await create(same, "repeats.jsonl")).id);
    expect(repeats, JSON.stringify(repeats.errors)).toMatchObject({ status: "completed", cached_lines: 3 });
    const page = await open(1280, `#batch/${repeats.id}`);
    await page.waitForFunction((id) => document.getElementById("b-id")?.textContent === id, repeats.id);
    expect(await page.locator("#b-cached").innerText()).toBe("3 of 4 answered from cache");
    await page.close();
    const plain = await open(1280, `#batch/${ids.done}`);
    await plain.waitForFunction((id) => document.getElementById("b-id")?.textContent === id, ids.done);
    expect(await shown(plain, "#b-cached")).toBe(false);
    await plain.close();
  });

  it("reads a batch refused at validation as refused: no request ran, its problems by line, no failed line", async () => {
    const batch = await waitForBatch(svc.baseUrl, ids.refused);
    expect(batch).toMatchObject({ status: "failed", request_counts: { completed: 0, failed: 0, total: 0 } });
    for (const width of [1280, 390]) {
      const page = await open(width, `#batch/${ids.refused}`);
      await page.waitForFunction((id) => document.getElementById("b-id")?.textContent === id, ids.refused);
      const progress = await page.locator("#b-progress").innerText();
      expect(progress).toMatch(/refused at validation: no request ran/i);
      expect(progress).not.toMatch(/\d+ failed/);
      expect(await page.locator("#b-reason").innerText()).toMatch(/^line 2: /m);
      expect(await page.locator("#b-errors tr").count()).toBe(0);
      expect(await shown(page, "#b-errors-card")).toBe(false);
      await page.screenshot({ path: path.join(SHOTS, `console-refused-${width}.png`), fullPage: true });
      await page.close();
    }
    const list = await open(1280);
    const row = list.locator(`tr.batch[data-id="${ids.refused}"]`);
    await row.waitFor();
    expect(await row.locator("td.progress").innerText()).toMatch(/refused at validation/i);
    await list.close();
  });
});
