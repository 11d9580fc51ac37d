// Starts the real service (real engine, real stores, real worker) on 127.0.0.1 with a temp BATCH_DIR.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type RequestListener, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import type pino from "pino";
import { applyServerLimits } from "../../api/http/server.js";
import { createLogger } from "../../app/logger.js";
import { buildService, type Service } from "../../app/service.js";
import { type Config, loadConfig } from "../../config/config.js";
import { isFinal, pollBatch, until } from "../../testkit/batch-client.js";
import { testModelPath } from "../../testkit/model.js";

export interface TestService {
  /** One process, so its primary model's backend is up. */
  service: Service & { backend: NonNullable<Service["backend"]> };
  config: Config;
  baseUrl: string;
  batchDir: string;
  close(): Promise<void>;
}

/** The settings every in-process test service starts with: loopback, the test model, a small engine. */
export async function testServiceEnv(batchDir: string): Promise<Record<string, string>> {
  return {
    PORT: "0",
    HOST: "127.0.0.1",
    BATCH_DIR: batchDir,
    MODEL_PATH: await testModelPath(),
    THREADS: "1",
    SEQUENCES: "4",
    CONTEXT_SIZE: "512",
    EMBEDDING_CONTEXTS: "1",
    // As the processes tests start have it (vitest.config.ts).
    FLASH_ATTENTION: process.env.FLASH_ATTENTION ?? "auto",
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
  };
}

/** `opts.logger` replaces the service's logger (to read its lines in a test). */
export async function startTestService(env: Record<string, string> = {}, opts: { logger?: pino.Logger } = {}): Promise<TestService> {
  const batchDir = env.BATCH_DIR ?? mkdtempSync(path.join(os.tmpdir(), "obi-test-"));
  const removeOwnDir = () => {
    if (!env.BATCH_DIR) rmSync(batchDir, { recursive: true, force: true });
  };
  let config: Config;
  let built: Awaited<ReturnType<typeof buildService>>;
  try {
    config = loadConfig({ ...(await testServiceEnv(batchDir)), ...env });
    built = await buildService(config, opts.logger ?? createLogger(config.logLevel));
  } catch (err) {
    // A test that expects the start to fail gets no close(): the folder made for it goes here.
    removeOwnDir();
    throw err;
  }
  const service = { ...built, backend: built.backend! };
  const { server, port } = await listenOnLoopback(service.app, config);
  return {
    service,
    config,
    baseUrl: `http://127.0.0.1:${port}`,
    batchDir,
    async close() {
      const closing = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closing;
      await service.close({ graceMs: 2_000 });
      removeOwnDir();
    },
  };
}

/** Serves `app` on a free loopback port with the limits app/main.ts sets, so in-process tests meet the server clients do. */
export async function listenOnLoopback(app: RequestListener, config: Config): Promise<{ server: Server; port: number }> {
  const server = createServer(app);
  applyServerLimits(server, config.http);
  server.listen(0, "127.0.0.1");
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  return { server, port: (server.address() as AddressInfo).port };
}

/** The official `openai` client pointed at the test service (no retries: a test sees every answer). */
export function openaiClient(svc: Pick<TestService, "baseUrl">): OpenAI {
  return new OpenAI({ baseURL: `${svc.baseUrl}/v1`, apiKey: "unused", maxRetries: 0 });
}

/** How a wait for a final status polls. */
const FINAL_POLLS = { everyMs: 100, upToMs: 500 };

/**
 * Polls until the batch reaches a final status: every 100 ms at first, less often as it runs on (a poll is a request
 * to the service under test, and a suite waits thousands of seconds for batches).
 */
export const waitForBatch = (baseUrl: string, id: string, timeoutMs = 60_000, headers: Record<string, string> = {}): Promise<any> =>
  pollBatch(baseUrl, id, isFinal, { timeoutMs, headers, ...FINAL_POLLS });

/** Polls through the official client until the batch reaches a final status; returns it as the client types it. */
export const waitForClientBatch = (client: OpenAI, id: string, timeoutMs = 60_000) =>
  until(
    `batch ${id}`,
    async () => {
      const b = await client.batches.retrieve(id);
      return isFinal(b) ? b : undefined;
    },
    { ...FINAL_POLLS, timeoutMs },
  );
