// Swagger UI opened in a real headless Chromium, as a new user would: every operation renders, and each synchronous
// route's example, and POST /v1/batches's, runs from "Try it out" as it is. The service serves the generated
// reranker, a model that answers every endpoint (rerank and score need its classification head).
import { mkdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { ENDPOINTS } from "../../openai/backend.js";
import { haveChromium, launchChromium } from "../helpers/browser.js";
import { startTestService, type TestService, waitForBatch } from "../helpers/service.js";

let svc: TestService;
let browser: Browser;
beforeAll(async () => {
  if (!haveChromium) return;
  svc = await startTestService({ MODEL_PATH: await ensureGeneratedModel({ preset: "reranker" }) });
  browser = await launchChromium();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await svc?.close();
});

const shots = path.join(os.tmpdir(), "obi-screens");

// One page for the file: Swagger UI takes about 4 s to load and render this document on an idle machine, and each
// case leaves the operations it opened closed again. Its wait is long because four files share two cores in CI.
let docs: Promise<Page> | undefined;
function openDocs(): Promise<Page> {
  docs ??= (async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${svc.baseUrl}/docs`);
    await page.waitForSelector(".opblock", { timeout: 90_000 });
    return page;
  })();
  return docs;
}

/** Opens the operation, presses "Try it out" then "Execute" with the body Swagger UI filled in; the status and body. */
async function tryItOut(page: Page, method: string, route: string): Promise<{ status: string; body: string; sent: string }> {
  const op = page.locator(`.opblock-${method}`).filter({
    has: page.locator(".opblock-summary-path", { hasText: new RegExp(`^${route.replace(/\//g, "\\/\u200b?")}$`) }),
  });
  await op.locator(".opblock-summary").first().click();
  await op.locator("button.try-out__btn").click();
  const field = op.locator("textarea.body-param__text");
  const sent = (await field.count()) > 0 ? await field.inputValue() : "";
  await op.locator("button.execute").click();
  const cell = op.locator(".live-responses-table tr.response .response-col_status").first();
  await cell.waitFor({ timeout: 60_000 });
  const status = (await cell.textContent())?.trim() ?? "";
  const body = (await op.locator(".live-responses-table tr.response .response-col_description pre").first().textContent()) ?? "";
  await op.locator(".opblock-summary").first().click();
  return { status, body, sent };
}

describe.skipIf(!haveChromium)("Swagger UI in a browser", () => {
  it("renders every batch and file operation from /openapi.json", async () => {
    const page = await openDocs();
    const summaries = await page.$$eval(".opblock-summary-path", (els) => els.map((e) => e.textContent?.replace(/\u200b/g, "")));
    expect(summaries).toEqual(expect.arrayContaining(["/v1/batches", "/v1/files"]));
    expect(summaries.length).toBeGreaterThanOrEqual(10);
    mkdirSync(shots, { recursive: true });
    await page.screenshot({ path: path.join(shots, "swagger.png"), fullPage: true });
  }, 120_000);

  it("runs each synchronous route's example from Try it out: 200, the endpoint's answer", async () => {
    const page = await openDocs();
    const model = (await (await fetch(`${svc.baseUrl}/v1/models`)).json()).data[0].id;
    for (const endpoint of ENDPOINTS) {
      const { status, body, sent } = await tryItOut(page, "post", endpoint);
      expect(sent, endpoint).not.toContain("additionalProp");
      expect(JSON.parse(sent).model, endpoint).toBe(model);
      expect(status, `${endpoint}: ${body}`).toBe("200");
      const answer = JSON.parse(body);
      const shape: Record<string, object> = {
        "/v1/responses": { object: "response" },
        "/v1/chat/completions": { object: "chat.completion" },
        "/v1/completions": { object: "text_completion" },
        "/v1/embeddings": { object: "list" },
        "/v1/messages": { type: "message", role: "assistant" },
        "/v1/rerank": { results: expect.any(Array) },
        "/v1/score": { object: "list" },
      };
      expect(answer, endpoint).toMatchObject(shape[endpoint]);
    }
  }, 180_000);

  it("runs the usage and costs routes and pause/resume from Try it out as they are: 200", async () => {
    const page = await openDocs();
    const model = (await (await fetch(`${svc.baseUrl}/v1/models`)).json()).data[0].id;
    const ops: Array<[string, string]> = [
      ["get", "/v1/organization/usage/completions"],
      ["get", "/v1/organization/usage/embeddings"],
      ["get", "/v1/organization/costs"],
      ["post", "/v1/batches/pause"],
      ["post", "/v1/batches/resume"],
    ];
    for (const [method, route] of ops) {
      const { status, body, sent } = await tryItOut(page, method, route);
      if (method === "post") expect(JSON.parse(sent), route).toEqual({ model });
      expect(status, `${route}: ${body}`).toBe("200");
      expect(JSON.parse(body).object, route).toBe(method === "get" ? "page" : "list");
    }
  }, 180_000);

  it("creates a batch from POST /v1/batches's example as it is, and a message batch from Anthropic's", async () => {
    const page = await openDocs();
    const { status, body } = await tryItOut(page, "post", "/v1/batches");
    expect(status, body).toBe("200");
    const batch = JSON.parse(body);
    expect(batch).toMatchObject({ object: "batch", endpoint: "/v1/completions", request_counts: { total: 2 } });
    expect(batch.status).not.toBe("failed");
    const done = await waitForBatch(svc.baseUrl, batch.id);
    expect(done.request_counts).toEqual({ completed: 2, failed: 0, total: 2 });

    const anthropic = await tryItOut(page, "post", "/v1/messages/batches");
    expect(anthropic.status, anthropic.body).toBe("200");
    const created = JSON.parse(anthropic.body);
    expect(created).toMatchObject({ type: "message_batch", request_counts: { processing: 1 } });
    // Its one request runs: the example is a valid Messages request for this deployment's model.
    const ended = await waitForBatch(svc.baseUrl, created.id.replace(/^msgbatch_/, "batch_"));
    expect(ended.request_counts).toEqual({ completed: 1, failed: 0, total: 1 });
  }, 120_000);
});
