// The server's start as `npm start` runs it: the port is held before the model loads, and answered meanwhile.
import net from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../engine/generated-model.js";
import { spawnMain, untilListening } from "../helpers/process.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("main");
const running: Array<ReturnType<typeof spawnMain>> = [];
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

describe("the server's start", () => {
  it("holds its port while the model loads, answering 503 starting with Retry-After, then serves", async () => {
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
    const up = await untilListening(p);
    expect(up.baseUrl).toBe(`http://127.0.0.1:${port}`);
    expect((await fetch(`${up.baseUrl}/health`)).status).toBe(200);
    p.child.kill("SIGTERM");
    expect(await p.exited).toBe(0);
  });
});
