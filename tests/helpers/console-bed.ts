// A console in headless Chromium on a service running one long batch (2,000 completions of up to 256 tokens, on
// one spot slot), for the tests of a running batch's controls: started before the describe block's tests, the
// batch cancelled and everything closed after them.
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll } from "vitest";
import { completionJsonl } from "../../testkit/workload.js";
import { haveChromium, launchChromium } from "./browser.js";
import { uploadJsonl } from "./http-batches.js";
import { openaiClient, startTestService, type TestService } from "./service.js";

export interface ConsoleBed {
  readonly svc: TestService;
  /** The running batch. */
  readonly id: string;
  /** A page of the console at this width (900 px high), once it is live; `hash` such as `#batch/<id>`. */
  open(width: number, hash?: string): Promise<Page>;
}

export function consoleBed(prefix: string): ConsoleBed {
  const bed = { id: "" } as { svc: TestService; id: string; browser: Browser };
  beforeAll(async () => {
    if (!haveChromium) return;
    // One context: the long batch need only run, and so it takes one core at most from the rest of the run.
    bed.svc = await startTestService({ SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0", CONTEXTS: "1" });
    bed.browser = await launchChromium();
    const file = await uploadJsonl(bed.svc.baseUrl, completionJsonl(2000, { prefix, maxTokens: 256 }), {}, "overnight.jsonl");
    const client = openaiClient(bed.svc);
    bed.id = (await client.batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" })).id;
  }, 120_000);
  afterAll(async () => {
    if (bed.id) await fetch(`${bed.svc.baseUrl}/v1/batches/${bed.id}/cancel`, { method: "POST" }).catch(() => undefined);
    await bed.browser?.close();
    await bed.svc?.close();
  });
  return {
    get svc() {
      return bed.svc;
    },
    get id() {
      return bed.id;
    },
    async open(width, hash = "") {
      const page = await bed.browser.newPage({ viewport: { width, height: 900 }, acceptDownloads: true });
      await page.goto(`${bed.svc.baseUrl}/${hash}`);
      await page.waitForFunction(() => document.getElementById("live")?.className === "on", undefined, { timeout: 15_000 });
      return page;
    },
  };
}
