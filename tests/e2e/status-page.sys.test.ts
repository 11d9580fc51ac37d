// The page at / (the console) in a real headless Chromium: queue, pools and batch rows with live progress,
// deadline and pool, updated by polling without a reload; the screenshot is checked for the rows.
import { mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { haveChromium, launchChromium } from "../helpers/browser.js";
import { startTestService, type TestService, waitForBatch } from "../helpers/service.js";

const SCREENSHOT = path.join(os.tmpdir(), "obi-screens", "status-page.png");

let svc: TestService;
let browser: Browser;
beforeAll(async () => {
  if (!haveChromium) return;
  // One slot: a long batch runs while the next one waits in the queue.
  svc = await startTestService({ SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0" });
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await svc?.close();
});

/** The inline form: n prompts, one batch. */
async function submit(n: number, maxTokens: number, window = "24h") {
  const res = await fetch(`${svc.baseUrl}/v1/batches`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      completion_window: window,
      max_tokens: maxTokens,
      input: Array.from({ length: n }, (_, i) => ({ prompt: `Once upon a time ${i}` })),
    }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as { id: string };
}

const rowText = (page: Page, id: string) => page.locator(`tr.batch[data-id="${id}"]`).innerText();

/** Pixels of the screenshot close to an RGB colour, counted by the browser's own PNG decoder. */
async function countColour(page: Page, png: Buffer, rgb: [number, number, number]): Promise<number> {
  return page.evaluate(
    async ({ src, rgb }) => {
      const img = new Image();
      img.src = src;
      await img.decode();
      const canvas = document.createElement("canvas");
      canvas.width = img.width;
      canvas.height = img.height;
      const ctx = canvas.getContext("2d")!;
      ctx.drawImage(img, 0, 0);
      const d = ctx.getImageData(0, 0, img.width, img.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4)
        if (Math.abs(d[i] - rgb[0]) + Math.abs(d[i + 1] - rgb[1]) + Math.abs(d[i + 2] - rgb[2]) < 30) n++;
      return n;
    },
    { src: `data:image/png;base64,${png.toString("base64")}`, rgb },
  );
}

describe.skipIf(!haveChromium)("status page in a browser", () => {
  it("shows the queue, the pools and every batch with progress, deadline and pool, live", async () => {
    const done = await submit(3, 4);
    await waitForBatch(svc.baseUrl, done.id);
    // Long enough (minutes on the fastest engine here) that the cancel below always lands while it runs.
    const long = await submit(1000, 250);
    const queued = await submit(2, 4, "2h");

    const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
    await page.goto(svc.baseUrl);
    await page.waitForSelector(`tr.batch[data-id="${queued.id}"]`, { timeout: 10_000 });
    expect(await page.locator("tr.batch").count()).toBe(3);

    const finished = await rowText(page, done.id);
    expect(finished).toMatch(/completed/);
    expect(finished).toMatch(/3 \/ 3 \(100%\)/);
    expect(finished).toMatch(/spot/);
    expect(finished).toMatch(/met · 2[34]h \d+m to spare/);
    expect(await rowText(page, long.id)).toMatch(/in progress[\s\S]*spot[\s\S]*in 2[34]h/);
    expect(await rowText(page, queued.id)).toMatch(/validating[\s\S]*0 \/ 2 \(0%\)[\s\S]*queued[\s\S]*in (1h 59m|2h 0m)[\s\S]*pending/);
    expect(await page.locator("#queue-depth").innerText()).toBe("1 queued");
    expect(await page.locator("#pool-spot").innerText()).toMatch(/1 \/ 1[\s\S]*running batch_/);
    expect(await page.locator("#pool-dedicated").innerText()).toMatch(/0 \/ 0/);
    await page.waitForFunction(() => document.getElementById("live")?.className === "on");
    // Live progress: the running batch's bar moves while the page stays open.
    await page.waitForFunction(
      (id) => /^[1-9]\d* \/ 1000/.test(document.querySelector(`tr.batch[data-id="${id}"] td.progress`)?.textContent ?? ""),
      long.id,
      {
        timeout: 30_000,
      },
    );

    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    const png = await page.screenshot({ path: SCREENSHOT, fullPage: true });
    // The finished batch's full green bar and badge, and the running one's blue badge and pool meter.
    expect(await countColour(page, png, [0x12, 0xb7, 0x6a])).toBeGreaterThan(1000);
    expect(await countColour(page, png, [0x2e, 0x90, 0xfa])).toBeGreaterThan(300);
    const table = await page.locator("#batches table").boundingBox();
    expect(table!.height).toBeGreaterThan(3 * 30);

    // Live: once the long batch is cancelled the queued one runs, and its row turns completed, no reload.
    const cancel = await fetch(`${svc.baseUrl}/v1/batches/${long.id}/cancel`, { method: "POST" });
    expect(((await cancel.json()) as { status: string }).status).toBe("cancelling");
    await page.waitForSelector(`tr.batch[data-id="${queued.id}"][data-status="completed"]`, { timeout: 30_000 });
    expect(await rowText(page, long.id)).toMatch(/cancelled/);
    expect(await rowText(page, queued.id)).toMatch(/2 \/ 2 \(100%\)/);
    await page.close();
  });
});
