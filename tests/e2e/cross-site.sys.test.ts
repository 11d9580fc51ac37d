// A page of another origin in a real headless Chromium, served by a second server on 127.0.0.1 as any site the user
// opens would be: what it sends to the open service (no keys, on loopback) creates, pauses and cancels nothing and
// runs no request, by every means a page has without asking the service first; it cannot frame the console, nor reach
// the service by a name of its own pointed at 127.0.0.1 (DNS rebinding, made here by Chromium's host resolver rules).
// The console and Swagger UI, on the service's own origin, go on working.
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionJsonl } from "../../testkit/workload.js";
import { haveChromium, launchChromium } from "../helpers/browser.js";
import { pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import { openaiClient, startTestService, type TestService } from "../helpers/service.js";

let svc: TestService;
let browser: Browser;
let other: http.Server;
let otherUrl = "";
/** A site's name that the browser resolves to this machine, as a rebinding attacker's DNS makes it. */
const REBOUND = "rebound.attacker.test";
/** A long batch on the one slot: what the hostile page tries to pause and cancel. */
let id = "";

beforeAll(async () => {
  if (!haveChromium) return;
  // One context: the long batch need only run, and so it takes one core at most from the rest of the run.
  svc = await startTestService({ SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "0", CONTEXTS: "1" });
  browser = await launchChromium([`--host-resolver-rules=MAP ${REBOUND} 127.0.0.1`]);
  const file = await uploadJsonl(svc.baseUrl, completionJsonl(2000, { prefix: "xs", maxTokens: 256 }), {}, "nightly.jsonl");
  id = (await openaiClient(svc).batches.create({ input_file_id: file.id, endpoint: "/v1/completions", completion_window: "24h" })).id;
  await pollBatch(svc.baseUrl, id, (b) => b.status === "in_progress");
  // Another origin: the same host on another port, as a page of any site reaches the service through the browser.
  other = http.createServer((_req, res) =>
    res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>elsewhere</title>"),
  );
  other.listen(0, "127.0.0.1");
  await new Promise<void>((resolve) => other.once("listening", () => resolve()));
  otherUrl = `http://127.0.0.1:${(other.address() as AddressInfo).port}/`;
}, 120_000);
afterAll(async () => {
  if (id) await fetch(`${svc.baseUrl}/v1/batches/${id}/cancel`, { method: "POST" }).catch(() => undefined);
  await browser?.close();
  await new Promise((resolve) => (other ? other.close(resolve) : resolve(undefined)));
  await svc?.close();
});

/** What the hostile page must leave as it was: the batch, the lists, the synchronous requests served. */
async function observed() {
  const get = async (path: string) => (await fetch(`${svc.baseUrl}${path}`)).json() as Promise<any>;
  const batch = await get(`/v1/batches/${id}`);
  const metrics = await (await fetch(`${svc.baseUrl}/metrics`)).text();
  const served = metrics
    .split("\n")
    .filter((l) => l.startsWith("obi_sync_requests_total"))
    .reduce((n, l) => n + Number(l.split(" ").pop()), 0);
  return {
    status: batch.status,
    paused_at: batch.paused_at,
    batches: (await get("/v1/batches?limit=100")).data.length,
    files: (await get("/v1/files")).data.length,
    served,
  };
}

/** Refusals the service counted: each attempt below must have reached it and been answered 403 or 415. */
const refusals = async () =>
  (await (await fetch(`${svc.baseUrl}/metrics`)).text())
    .split("\n")
    .filter((l) => l.startsWith("obi_http_requests_total") && /code="(403|415)"/.test(l))
    .reduce((n, l) => n + Number(l.split(" ").pop()), 0);

describe.skipIf(!haveChromium)("a page of another origin", () => {
  it("creates, pauses and cancels nothing and runs no request; a preflighted request is refused", async () => {
    const before = await observed();
    const refusedBefore = await refusals();
    const page: Page = await browser.newPage();
    await page.goto(otherUrl);
    const outcome = await page.evaluate(
      async ({ base, id, model }) => {
        // What any script may send without a preflight: no-cors, and a text/plain, form or multipart body.
        const simple = (path: string, init: RequestInit = {}) =>
          fetch(`${base}${path}`, { method: "POST", mode: "no-cors", ...init }).then(() => "sent");
        const text = (body: object) => ({ headers: { "content-type": "text/plain" }, body: JSON.stringify(body) });
        const form = new FormData();
        form.append("purpose", "batch");
        form.append("file", new Blob(['{"custom_id":"x","method":"POST","url":"/v1/completions","body":{"prompt":"x"}}\n']), "x.jsonl");
        const sent = await Promise.all([
          simple("/v1/batches/pause", text({ model })),
          simple(`/v1/batches/${id}/pause`),
          simple(`/v1/batches/${id}/cancel`),
          simple("/v1/batches", text({ input: [{ prompt: "Once upon a time" }], max_tokens: 8 })),
          simple("/v1/files", { body: form }),
          simple("/v1/chat/completions", text({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 8 })),
          simple("/v1/completions", {
            headers: { "content-type": "application/x-www-form-urlencoded" },
            body: '{"prompt":"Once","max_tokens":8}',
          }),
        ]);
        // A JSON body needs a preflight, which the service refuses: the browser never sends the request.
        const preflighted = await fetch(`${base}/v1/batches/${id}/cancel`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: "{}",
        }).then(
          () => "answered",
          () => "blocked",
        );
        return { sent, preflighted };
      },
      { base: svc.baseUrl, id, model: svc.service.backend.info.model },
    );
    await page.close();
    expect(outcome.sent).toEqual(Array(7).fill("sent"));
    expect(outcome.preflighted).toBe("blocked");
    // Seven requests and one preflight reached the service, and each was refused.
    expect((await refusals()) - refusedBefore).toBe(8);
    expect(await observed()).toEqual(before);
    expect(before).toMatchObject({ status: "in_progress", paused_at: null });
  });
});

describe.skipIf(!haveChromium)("a page of another origin, by other means", () => {
  it("cannot show the console in a frame", async () => {
    const page = await browser.newPage();
    await page.goto(otherUrl);
    await page.evaluate(
      (src) =>
        new Promise<void>((resolve) => {
          const frame = document.createElement("iframe");
          frame.onload = () => resolve();
          frame.src = src;
          document.body.append(frame);
        }),
      `${svc.baseUrl}/`,
    );
    const frame = page.frames().find((f) => f !== page.mainFrame())!;
    expect(await frame.evaluate(() => document.getElementById("keyform") !== null).catch(() => false)).toBe(false);
    await page.close();
  });

  it("served under a name of its own pointed at 127.0.0.1, reads and changes nothing though the browser calls it same-origin", async () => {
    const before = await observed();
    const port = new URL(svc.baseUrl).port;
    const page = await browser.newPage();
    // The attacker's script runs in a page of its own origin, whose name now resolves to this machine. (Served from
    // the attacker's public address, Chromium's Private Network Access would block its requests to loopback; other
    // browsers have no such check, so the page is opened at the rebound name directly, as they would reach it.)
    const opened = await page.goto(`http://${REBOUND}:${port}/`);
    expect(opened?.status()).toBe(403);
    const seen = await page.evaluate(async (id) => {
      const list = await fetch("/v1/batches");
      const pause = await fetch(`/v1/batches/${id}/pause`, { method: "POST" });
      return { list: list.status, listed: (await list.text()).includes(id), pause: pause.status, code: (await pause.json()).error?.code };
    }, id);
    await page.close();
    expect(seen).toEqual({ list: 403, listed: false, pause: 403, code: "host_not_allowed" });
    expect(await observed()).toEqual(before);
  });
});

describe.skipIf(!haveChromium)("the service's own pages", () => {
  it("the console pauses and resumes the batch", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${svc.baseUrl}/#batch/${id}`);
    await page.waitForFunction(() => /in progress/.test(document.getElementById("b-status")?.textContent ?? ""), undefined, {
      timeout: 15_000,
    });
    await page.click("#b-pause");
    await page.waitForFunction(() => /Paused:/.test(document.getElementById("b-action-result")?.textContent ?? ""));
    expect((await observed()).paused_at).toBeGreaterThan(0);
    await page.click("#b-resume");
    await page.waitForFunction(() => /Resumed:/.test(document.getElementById("b-action-result")?.textContent ?? ""));
    expect((await observed()).paused_at).toBeNull();
    await page.close();
  });

  it("Swagger UI's Try it out sends a POST the service takes", async () => {
    const page = await browser.newPage();
    await page.goto(`${svc.baseUrl}/docs`);
    const op = page.locator(".opblock-post", { has: page.locator('.opblock-summary-path[data-path="/v1/batches/{batch_id}/pause"]') });
    await op.locator(".opblock-summary").click();
    await op.locator("button.try-out__btn").click();
    await op.locator('input[placeholder="batch_id"]').fill(id);
    await op.locator("button.execute").click();
    const status = op.locator(".live-responses-table tbody .response-col_status");
    await status.waitFor({ timeout: 20_000 });
    expect((await status.textContent())?.trim()).toBe("200");
    expect((await observed()).paused_at).toBeGreaterThan(0);
    await page.close();
  });
});
