// The server's start as `npm start` runs it: the port is held before the model loads, and answered meanwhile; a
// worker of the distributed mode says when the address it gives the API servers reaches only its own machine.
import net from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/load/generated-model.js";
import { POSTGRES_BIN } from "../../testkit/postgres.js";
import { type SharedState, startChild, startSharedState } from "../helpers/cluster.js";
import { spawnMain, untilListening } from "../helpers/process.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("main");
const running: Array<Pick<ReturnType<typeof spawnMain>, "child">> = [];
afterAll(async () => {
  for (const p of running) if (p.child.exitCode === null) p.child.kill("SIGKILL");
});

/** A port free now: the server is told it, as a user's PORT would. */
async function freePort(): Promise<number> {
  const probe = net.createServer().listen(0, "127.0.0.1");
  await new Promise((r) => probe.once("listening", r));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise((r) => probe.close(r));
  return port;
}

describe.skipIf(!POSTGRES_BIN)("a worker of the distributed mode", () => {
  let shared: SharedState | undefined;
  afterAll(async () => {
    for (const p of running) if (p.child.exitCode === null) p.child.kill("SIGKILL");
    await shared?.close();
  });

  it("warns at start when it would tell the API servers a loopback address, and not when told WORKER_URL", async () => {
    shared = await startSharedState();
    const loopback = await startChild(shared, { ROLE: "worker", WORKER_ID: "on-loopback" });
    running.push(loopback);
    const told = await startChild(shared, { ROLE: "worker", WORKER_ID: "told", WORKER_URL: "http://10.0.0.7:8000" });
    running.push(told);
    const warning = new RegExp(
      `this worker tells the API servers to send it synchronous requests at ${loopback.baseUrl}: only those on this machine can; on several machines set HOST=0\\.0\\.0\\.0 \\(API_KEYS makes it the default\\) or WORKER_URL`,
    );
    await expect.poll(() => loopback.output()).toMatch(warning);
    expect(told.output()).not.toMatch(/tells the API servers to send it synchronous requests/);
  }, 120_000);
});

describe("the server's start", () => {
  it("holds its port while the model loads: /health 200 (a liveness probe leaves it be), /ready and the rest 503 starting with Retry-After, then serves", async () => {
    // A 66 MB model: its load takes long enough to be asked during it.
    const model = await ensureGeneratedModel({ preset: "small" });
    const port = await freePort();
    const p = spawnMain({
      HOST: "127.0.0.1",
      PORT: String(port),
      MODEL_PATH: model,
      BATCH_DIR: await scratch.file("batches"),
      THREADS: "1",
    });
    running.push(p);
    while (!/loading model/.test(p.output()) && p.child.exitCode === null) await new Promise((r) => setTimeout(r, 2));
    const during = await fetch(`http://127.0.0.1:${port}/v1/models`);
    expect(during.status).toBe(503);
    expect(during.headers.get("retry-after")).toBe("5");
    expect(await during.json()).toEqual({
      error: {
        message: "The server is starting: its model is loading, or it is reaching its database. Retry shortly.",
        type: "server_error",
        param: null,
        code: "starting",
      },
    });
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "starting" });
    const ready = await fetch(`http://127.0.0.1:${port}/ready`);
    expect(ready.status).toBe(503);
    expect(ready.headers.get("retry-after")).toBe("5");
    expect(await ready.json()).toMatchObject({ status: "starting", downloads: [], error: { code: "starting" } });
    const up = await untilListening(p);
    expect(up.baseUrl).toBe(`http://127.0.0.1:${port}`);
    expect(await (await fetch(`${up.baseUrl}/health`)).json()).toEqual({ status: "ok" });
    p.child.kill("SIGTERM");
    expect(await p.exited).toBe(0);
  });

  it("a stop while the model loads exits at once with the signal's status", async () => {
    const model = await ensureGeneratedModel({ preset: "small" });
    const p = spawnMain({ HOST: "127.0.0.1", PORT: "0", MODEL_PATH: model, BATCH_DIR: await scratch.file("batches"), THREADS: "1" });
    running.push(p);
    while (!/loading model/.test(p.output()) && p.child.exitCode === null) await new Promise((r) => setTimeout(r, 2));
    p.child.kill("SIGTERM");
    expect(await p.exited).toBe(143);
    expect(p.output()).toMatch(/stopped while starting: exiting/);
    expect(p.output()).not.toMatch(/listening on/);
  });
});
