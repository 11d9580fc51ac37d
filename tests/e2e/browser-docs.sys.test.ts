// Swagger UI opened in a real headless Chromium, as a new user would.
import { mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { haveChromium, launchChromium } from "../helpers/browser.js";
import { startTestService, type TestService } from "../helpers/service.js";

let svc: TestService;
let browser: Browser;
beforeAll(async () => {
  if (!haveChromium) return;
  svc = await startTestService();
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await svc?.close();
});

describe.skipIf(!haveChromium)("Swagger UI in a browser", () => {
  it("renders every batch and file operation from /openapi.json", async () => {
    const page = await browser.newPage();
    await page.goto(`${svc.baseUrl}/docs`);
    await page.waitForSelector(".opblock", { timeout: 20_000 });
    const summaries = await page.$$eval(".opblock-summary-path", (els) => els.map((e) => e.textContent?.replace(/\u200b/g, "")));
    expect(summaries).toEqual(expect.arrayContaining(["/v1/batches", "/v1/files"]));
    expect(summaries.length).toBeGreaterThanOrEqual(10);
    const shots = path.join(os.tmpdir(), "obi-screens");
    mkdirSync(shots, { recursive: true });
    await page.screenshot({ path: path.join(shots, "swagger.png"), fullPage: true });
    await page.close();
  });
});
