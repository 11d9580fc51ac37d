// Headless Chromium for the browser tests (Debian's chromium-headless-shell, else its chromium, driven by
// playwright-core); the tests skip where neither is (CI installs the shell in .ci/run).
import { existsSync } from "node:fs";
import { type Browser, chromium, type Locator, type Page } from "playwright-core";

/**
 * The headless shell first: the same Chromium release and Blink without the browser's windowing, as Playwright runs
 * headless tests; the console's tests took half the CPU in it (12 s of Chromium's against 25-27 s).
 */
const INSTALLED = ["/usr/bin/chromium-headless-shell", "/usr/bin/chromium"];
export const CHROMIUM = process.env.CHROMIUM_PATH ?? INSTALLED.find((p) => existsSync(p)) ?? INSTALLED[0];
export const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`browser tests skipped: no Chromium at ${CHROMIUM} (apt-get install -y chromium-headless-shell)`);

/** `args`: more of Chromium's switches (a host resolver rule that points a name at 127.0.0.1). */
export function launchChromium(args: readonly string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
      ...args,
    ],
  });
}

/**
 * A table's wrapper (`.table-wrap`, which scrolls sideways when the table outgrows it): its width, the table's as laid
 * out (`scroll`), and the table's at its narrowest (each column at its longest unbreakable content), which what the
 * rows hold as they change cannot push further; `right`, the wrapper's right edge in the page.
 */
export function tableFit(wrap: Locator): Promise<{ client: number; scroll: number; narrowest: number; right: number }> {
  return wrap.evaluate((e) => {
    const table = e.querySelector("table") as HTMLTableElement;
    table.style.width = "min-content";
    const narrowest = table.getBoundingClientRect().width;
    table.style.width = "";
    return { client: e.clientWidth, scroll: e.scrollWidth, narrowest, right: e.getBoundingClientRect().right };
  });
}

/** The console at `base`, `width` px wide (900 high), once its live view is on; `hash` opens a page of it. */
export async function openConsole(browser: Browser, base: string, width: number, hash = "", acceptDownloads = false): Promise<Page> {
  const page = await browser.newPage({ viewport: { width, height: 900 }, acceptDownloads });
  await page.goto(`${base}/${hash}`);
  await page.waitForFunction(() => document.getElementById("live")?.className === "on", undefined, { timeout: 15_000 });
  return page;
}
