// The console with a keys file, in a real headless Chromium: an admin's pool cards name every key's running batch, a
// key that is not an admin is told that another key's batch holds the slot (never "idle"), an admin on another key's
// batch is offered only what it can do (no Cancel or file download that would answer "No batch found") and told
// whose the batch is, and a `*` limit reads as the limit of each model. Screenshots go to the temp folder.
import { mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionJsonl } from "../../testkit/workload.js";
import { haveChromium, launchChromium, tableFit } from "../helpers/browser.js";
import { createBatch, uploadJsonl } from "../helpers/http-batches.js";
import { writeKeysFile } from "../helpers/keys.js";
import { scratchDir } from "../helpers/scratch.js";
import { startTestService, type TestService, waitForBatch } from "../helpers/service.js";

// Only to look at: the pictures of docs/console.md are the other console tests' (CONSOLE_SCREENSHOTS=docs).
const SHOTS = path.join(os.tmpdir(), "obi-screens");
const scratch = scratchDir("console-keys");
let svc: TestService;
let browser: Browser;
let auth: Record<string, Record<string, string>>;
const ids: Record<string, string> = {};

async function submit(key: string, n: number, maxTokens: number, tag: string): Promise<string> {
  const file = await uploadJsonl(svc.baseUrl, completionJsonl(n, { prefix: tag, maxTokens }), auth[key], `${tag}.jsonl`);
  const created = await createBatch(svc.baseUrl, file.id, auth[key]);
  expect(created.status).toBe(200);
  return created.body.id;
}

beforeAll(async () => {
  if (!haveChromium) return;
  const dir = path.dirname(await scratch.file());
  mkdirSync(dir, { recursive: true });
  const keys = writeKeysFile(dir, [{ id: "ops", admin: true }, { id: "team-a", limits: { "*": 2_000_000 } }, { id: "team-b" }]);
  auth = keys.auth;
  // One slot: the long batch holds it while the tests look.
  svc = await startTestService({ KEYS_FILE: keys.file, SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0" });
  browser = await launchChromium();
  ids.done = await submit("team-a", 2, 4, "small");
  await waitForBatch(svc.baseUrl, ids.done, 60_000, auth["team-a"]);
  ids.long = await submit("team-a", 2000, 256, "long");
  mkdirSync(SHOTS, { recursive: true });
}, 120_000);
afterAll(async () => {
  if (ids.long)
    await fetch(`${svc.baseUrl}/v1/batches/${ids.long}/cancel`, { method: "POST", headers: auth["team-a"] }).catch(() => undefined);
  await browser?.close();
  await svc?.close();
});

/** The console as `key` sees it, at 1,280 px, once live. */
async function open(key: string, hash = ""): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  await page.goto(`${svc.baseUrl}/`);
  await page.evaluate((k) => sessionStorage.setItem("obi-api-key", k), auth[key].authorization.slice("Bearer ".length));
  await page.goto(`${svc.baseUrl}/${hash}`);
  await page.reload();
  await page.waitForFunction(() => document.getElementById("live")?.className === "on", undefined, { timeout: 15_000 });
  return page;
}

const shown = (page: Page, sel: string) => page.locator(sel).evaluate((e) => (e as HTMLElement).offsetParent !== null);

describe.skipIf(!haveChromium)("the console with a keys file", () => {
  it("names every key's running batch on an admin's pool cards, and tells another key the slot is taken", async () => {
    const admin = await open("ops");
    await admin.waitForFunction((id) => document.getElementById("pool-spot")?.textContent?.includes(id), ids.long, { timeout: 30_000 });
    expect(await admin.locator("#pool-spot").innerText()).toMatch(new RegExp(`1 / 1[\\s\\S]*running ${ids.long}$`));
    await admin.close();
    const other = await open("team-b");
    await other.waitForSelector("#pool-spot");
    expect(await other.locator("#pool-spot").innerText()).toMatch(/1 \/ 1[\s\S]*running 1 batch of another key$/);
    expect(await other.locator("#pool-spot").innerText()).not.toContain(ids.long);
    // /pools says the same to a script.
    const pools = await (await fetch(`${svc.baseUrl}/pools`, { headers: auth["team-b"] })).json();
    expect(pools.pools.find((p: { name: string }) => p.name === "spot")).toMatchObject({ in_use: 1, jobs: [], other_keys_jobs: 1 });
    const all = await (await fetch(`${svc.baseUrl}/pools`, { headers: auth.ops })).json();
    expect(all.pools.find((p: { name: string }) => p.name === "spot").jobs).toEqual([ids.long]);
    await other.close();
  });

  it("offers an admin on another key's batch only what it can do, and says whose the batch is", async () => {
    const page = await open("ops", `#batch/${ids.long}`);
    await page.waitForFunction((id) => document.getElementById("b-id")?.textContent === id, ids.long);
    await page.waitForSelector("#b-owner:not(.hidden)");
    expect(await page.locator("#b-owner").innerText()).toMatch(
      /key team-a's[\s\S]*only its own key can cancel or retry it or read its results/,
    );
    for (const button of ["#b-cancel", "#b-retry", "#b-dl-input", "#b-dl-output", "#b-dl-errors"])
      expect(await shown(page, button), button).toBe(false);
    expect(await shown(page, "#b-pause")).toBe(true);
    // Its results are its own key's: the page shows none of them, and the routes refuse them alike.
    expect(await shown(page, "#b-first-card")).toBe(false);
    expect(await page.locator("#b-action-result").innerText()).toBe("");
    await page.screenshot({ path: path.join(SHOTS, "console-admin-other-key.png") });
    const done = await (await fetch(`${svc.baseUrl}/v1/batches/${ids.done}`, { headers: auth.ops })).json();
    for (const route of [`/v1/batches/${ids.done}/output`, `/v1/batches/${ids.done}/results`, `/v1/files/${done.output_file_id}/content`]) {
      const res = await fetch(`${svc.baseUrl}${route}`, { headers: auth.ops });
      expect(res.status, route).toBe(403);
      expect((await res.json()).error, route).toMatchObject({ code: "insufficient_permissions" });
    }
    await page.close();

    // The batch's own key is offered everything, and told nothing about keys.
    const own = await open("team-a", `#batch/${ids.long}`);
    await own.waitForFunction((id) => document.getElementById("b-id")?.textContent === id, ids.long);
    for (const button of ["#b-cancel", "#b-retry", "#b-dl-input", "#b-dl-output", "#b-dl-errors"])
      expect(await shown(own, button), button).toBe(true);
    expect(await shown(own, "#b-owner")).toBe(false);
    await own.close();
  }, 60_000);

  it("offers no action on a batch's page that has no batch, and says why: no key yet, another key's batch, an unknown id", async () => {
    const BUTTONS = ["#b-dl-input", "#b-dl-output", "#b-dl-errors", "#b-retry", "#b-pause", "#b-resume", "#b-cancel"];
    const noAction = async (page: Page) => {
      for (const button of BUTTONS) expect(await shown(page, button), button).toBe(false);
      expect(await page.locator("#b-action-result").innerText()).toBe("");
    };
    for (const width of [1280, 390]) {
      const page = await browser.newPage({ viewport: { width, height: 900 } });
      const errors: string[] = [];
      page.on("pageerror", (e) => errors.push(e.message));
      // No key yet: it asks for one, and the batch opens once it is given.
      await page.goto(`${svc.baseUrl}/#batch/${ids.long}`);
      await page.waitForSelector("#keyform.show");
      await page.waitForSelector("#b-missing:not(.hidden)");
      await noAction(page);
      expect(await page.locator("#b-missing").innerText()).toMatch(
        new RegExp(`An API key is needed[\\s\\S]*Enter the API key above to show batch ${ids.long}\\.`),
      );
      expect(await page.locator("#live").innerText()).toBe("waiting for an API key");
      // Another key's batch: not found for that key, with the way back.
      await page.fill("#key", auth["team-b"].authorization.slice("Bearer ".length));
      await page.press("#key", "Enter");
      await page.waitForFunction(() => /No such batch/.test(document.getElementById("b-missing")?.textContent ?? ""));
      // The key's field went with its form: focus is on what it opened.
      await page.waitForFunction(() => document.activeElement?.id === "b-missing-title");
      await noAction(page);
      expect(await page.locator("#b-missing").innerText()).toContain(`There is no batch ${ids.long} for this key`);
      expect(await page.locator("#live").getAttribute("class")).toBe("on");
      expect(await page.locator("#error").innerText()).toBe("");
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width);
      await page.screenshot({ path: path.join(SHOTS, `console-no-batch-${width}.png`) });
      // Its own key opens it, with its actions.
      await page.evaluate((k) => sessionStorage.setItem("obi-api-key", k), auth["team-a"].authorization.slice("Bearer ".length));
      await page.reload();
      await page.waitForFunction((id) => document.getElementById("b-id")?.textContent === id, ids.long);
      expect(await shown(page, "#b-cancel")).toBe(true);
      expect(await shown(page, "#b-missing")).toBe(false);
      // An unknown id, from the keyboard: its link back to the list works.
      await page.evaluate(() => {
        location.hash = "#batch/batch_000000000000000000000000";
      });
      await page.waitForSelector("#b-missing:not(.hidden)");
      await noAction(page);
      await page.waitForFunction(() => document.activeElement?.id === "b-missing-title");
      await page.keyboard.press("Tab");
      await page.keyboard.press("Enter");
      await page.waitForSelector(`tr.batch[data-id="${ids.long}"]`);
      expect(errors).toEqual([]);
      await page.close();
    }
  }, 60_000);

  it("fits an admin's list, with its Key column, in 1,280 px", async () => {
    const page = await open("ops");
    await page.waitForSelector(`#batch-table.admin tr.batch[data-id="${ids.long}"]`);
    const wrap = await tableFit(page.locator("#batches .table-wrap"));
    expect(wrap.scroll).toBeLessThanOrEqual(wrap.client);
    expect(wrap.narrowest).toBeLessThanOrEqual(wrap.client);
    await page.locator("#batches").screenshot({ path: path.join(SHOTS, "console-admin-list-1280.png") });
    await page.close();
  });

  it("reads a `*` limit as each model's: the model's enqueued tokens against it", async () => {
    const page = await open("ops");
    await page.waitForSelector('tr.usage[data-key="team-a"]', { timeout: 15_000 });
    const cell = (await page.locator('tr.usage[data-key="team-a"] td').allTextContents())[2];
    expect(cell).toMatch(/^\S+: [\d,]+ \/ 2,000,000, any other model: up to 2,000,000 each$/);
    expect(cell).not.toContain("*");
    expect((await page.locator('tr.usage[data-key="team-b"] td').allTextContents())[2]).toBe("—");
    await page.locator("#usage").screenshot({ path: path.join(SHOTS, "console-usage-limits.png") });
    await page.close();
  });
});
