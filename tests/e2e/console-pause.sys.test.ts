// The console's Pause and Resume buttons in a real headless Chromium, at 1,280 and 390 px: one of the two shows
// while a batch has not ended, the batch page and the list say "paused" (and, once it ends, no more), and the API
// agrees. Screenshots go to
// $CONSOLE_SCREENSHOTS (docs/console.md's) or the temp folder.
import { mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { haveChromium } from "../helpers/browser.js";
import { consoleBed } from "../helpers/console-bed.js";

const SHOTS = process.env.CONSOLE_SCREENSHOTS ?? path.join(os.tmpdir(), "obi-screens");
const bed = consoleBed("pz");
const open = (width: number, hash = "") => bed.open(width, hash);

/**
 * The batch page's next poll, answered by the service at once and held from the page until `release`, which
 * resolves once the page has dealt with the answer (the poll loop asks again only after it has).
 */
async function holdNextPoll(page: Page) {
  const pattern = `**/console/api/batches/${bed.id}`;
  let letGo!: () => void;
  const released = new Promise<void>((r) => {
    letGo = r;
  });
  let held!: () => void;
  const isHeld = new Promise<void>((r) => {
    held = r;
  });
  let holding = true;
  await page.route(pattern, async (route) => {
    if (!holding) return route.continue();
    holding = false;
    // Answered now, before what the test does next; delivered to the page when released.
    const response = await route.fetch();
    held();
    await released;
    await route.fulfill({ response });
  });
  await isHeld;
  return {
    async release() {
      const next = page.waitForRequest((r) => r.url().endsWith(`/console/api/batches/${bed.id}`) && r.method() === "GET");
      letGo();
      await next;
      await page.unroute(pattern);
    },
  };
}

const shown = (page: Page, sel: string) => page.locator(sel).evaluate((e) => !e.classList.contains("hidden"));

describe.skipIf(!haveChromium)("pause and resume in the console", () => {
  it("pauses from the batch page, says so on the page and in the list, and resumes", async () => {
    mkdirSync(SHOTS, { recursive: true });
    const page = await open(1280, `#batch/${bed.id}`);
    await page.waitForFunction(() => /in progress/.test(document.getElementById("b-status")?.textContent ?? ""));
    expect(await shown(page, "#b-pause")).toBe(true);
    expect(await shown(page, "#b-resume")).toBe(false);
    // From the keyboard: the button pressed goes away, and focus moves to the one that undoes it, not to <body>.
    // A poll asked before the pause answers after it: the page keeps what the pause said.
    const stale = await holdNextPoll(page);
    await page.focus("#b-pause");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => /Paused:/.test(document.getElementById("b-action-result")?.textContent ?? ""));
    await page.waitForFunction(() => document.getElementById("b-status")?.textContent === "in progress · paused");
    await stale.release();
    expect(await page.locator("#b-action-result").textContent()).toMatch(/^Paused:/);
    expect(await page.locator("#b-status").textContent()).toBe("in progress · paused");
    expect(await shown(page, "#b-pause")).toBe(false);
    expect(await shown(page, "#b-resume")).toBe(true);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("b-resume");
    expect((await (await fetch(`${bed.svc.baseUrl}/v1/batches/${bed.id}`)).json()).paused_at).toBeGreaterThan(0);
    await page.screenshot({ path: path.join(SHOTS, "console-paused.png") });

    const phone = await open(390, `#batch/${bed.id}`);
    await phone.waitForFunction(() => !document.getElementById("b-resume")?.classList.contains("hidden"));
    const box = await phone.locator("#b-resume").boundingBox();
    expect(box!.x + box!.width).toBeLessThanOrEqual(390);
    expect(await phone.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    await phone.screenshot({ path: path.join(SHOTS, "console-paused-phone.png"), fullPage: true });
    await phone.close();

    const list = await open(1280);
    await list.waitForSelector(`tr.batch[data-id="${bed.id}"]`);
    await list.waitForFunction((i) => /paused/.test(document.querySelector(`tr.batch[data-id="${i}"]`)?.textContent ?? ""), bed.id);
    await list.close();

    await page.focus("#b-resume");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => /Resumed:/.test(document.getElementById("b-action-result")?.textContent ?? ""));
    await page.waitForFunction(() => document.getElementById("b-status")?.textContent === "in progress");
    expect(await shown(page, "#b-pause")).toBe(true);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("b-pause");
    expect((await (await fetch(`${bed.svc.baseUrl}/v1/batches/${bed.id}`)).json()).paused_at).toBeNull();

    // Paused, then cancelled: it ends cancelled, and neither the page nor the list says paused any more.
    await page.focus("#b-pause");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.getElementById("b-status")?.textContent === "in progress · paused");
    await fetch(`${bed.svc.baseUrl}/v1/batches/${bed.id}/cancel`, { method: "POST" });
    await page.waitForFunction(() => document.getElementById("b-status")?.textContent === "cancelled", undefined, { timeout: 60_000 });
    expect(await shown(page, "#b-pause")).toBe(false);
    expect(await shown(page, "#b-resume")).toBe(false);
    expect((await (await fetch(`${bed.svc.baseUrl}/v1/batches/${bed.id}`)).json()).paused_at).toBeNull();
    const ended = await open(1280);
    await ended.waitForSelector(`tr.batch[data-id="${bed.id}"] .badge.cancelled`);
    expect(await ended.locator(`tr.batch[data-id="${bed.id}"] .badge.paused`).count()).toBe(0);
    await ended.close();
    await page.close();
  });
});
