// The console's view of a running batch's output in a real headless Chromium, at 1,280 and 390 px: the batch page
// lists its first results while it runs and downloads the results so far (the lines the API's output read gives,
// in the same order). Screenshots go to $CONSOLE_SCREENSHOTS (docs/console.md's) or the temp folder.
import { mkdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { outputSince } from "../../testkit/batch-client.js";
import { haveChromium } from "../helpers/browser.js";
import { consoleBed } from "../helpers/console-bed.js";

const SHOTS = process.env.CONSOLE_SCREENSHOTS ?? path.join(os.tmpdir(), "obi-screens");
const bed = consoleBed("fr");
const open = (width: number) => bed.open(width, `#batch/${bed.id}`);

describe.skipIf(!haveChromium)("a running batch's results in the console", () => {
  it("lists the first results while it runs and downloads the results so far", async () => {
    mkdirSync(SHOTS, { recursive: true });
    const page = await open(1280);
    await page.waitForFunction(() => document.querySelectorAll("#b-first tr").length === 5, undefined, { timeout: 60_000 });
    expect((await (await fetch(`${bed.svc.baseUrl}/v1/batches/${bed.id}`)).json()).status).toBe("in_progress");
    const first = (await outputSince(bed.svc.baseUrl, bed.id, 0, { limit: 5 }))!.map((l) => JSON.parse(l));
    const rows = await page.locator("#b-first tr").evaluateAll((trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    expect(rows.map((r) => r[0])).toEqual(first.map((l) => l.custom_id));
    expect(rows.map((r) => r[1])).toEqual(first.map(() => "200"));
    expect(rows[0][2]).toBe(
      String(first[0].response.body.choices[0].text).slice(0, 200) + (first[0].response.body.choices[0].text.length > 200 ? "…" : ""),
    );
    expect(await page.locator("#b-first-none").evaluate((e) => e.classList.contains("hidden"))).toBe(true);
    await page.waitForFunction(() => /^Download results so far \(\d+\)$/.test(document.getElementById("b-dl-output")?.textContent ?? ""));
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#b-dl-output")]);
    expect(download.suggestedFilename()).toBe(`${bed.id}_output_so_far.jsonl`);
    const got = readFileSync((await download.path())!, "utf8")
      .split("\n")
      .filter(Boolean);
    expect(got.length).toBeGreaterThanOrEqual(5);
    // The same lines as the API gives after them, in the same order.
    expect(await outputSince(bed.svc.baseUrl, bed.id, 0, { limit: got.length })).toEqual(got);
    await page.screenshot({ path: path.join(SHOTS, "console-first-results.png") });
    await page.close();

    const phone = await open(390);
    await phone.waitForFunction(() => document.querySelectorAll("#b-first tr").length === 5);
    expect(await phone.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    const table = await phone.locator("#first-table").boundingBox();
    expect(table!.x + table!.width).toBeLessThanOrEqual(390);
    await phone.locator("#first-table").scrollIntoViewIfNeeded();
    await phone.screenshot({ path: path.join(SHOTS, "console-first-results-phone.png") });
    await phone.close();
  });
});
