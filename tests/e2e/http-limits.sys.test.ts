// The real server process against misbehaving clients on real sockets: silent connections are closed,
// connections are capped (descriptors stay for the batch files), and errors Node's HTTP parser answers
// carry the same JSON error body as every other error.
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultMaxConnections } from "../../api/http/server.js";
import { until } from "../../testkit/batch-client.js";
import type { ServerProcess } from "../helpers/process.js";
import { serverTestbed } from "../helpers/server-testbed.js";

const bed = serverTestbed("http-limits", { HTTP_IDLE_TIMEOUT_SECONDS: "2", HTTP_HEADERS_TIMEOUT_SECONDS: "2", MAX_CONNECTIONS: "20" });
let s: ServerProcess;
let port: number;
beforeAll(async () => {
  s = await bed.start();
  port = Number(new URL(s.baseUrl).port);
});
afterAll(async () => {
  s?.child.kill("SIGTERM");
  await s?.exited;
});

/** A raw socket: what the server wrote, and when it closed it. */
function rawSocket(send?: string) {
  const socket = net.connect(port, "127.0.0.1");
  let received = "";
  socket.on("data", (d) => (received += d.toString()));
  socket.on("error", () => {});
  const opened = Date.now();
  const closed = new Promise<{ afterMs: number; received: string }>((resolve) =>
    socket.on("close", () => resolve({ afterMs: Date.now() - opened, received })),
  );
  if (send) socket.write(send);
  return { socket, closed };
}

const jsonBody = (raw: string) => JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4));

describe("HTTP limits on the server process", () => {
  it("closes a connection that never sends a byte", async () => {
    const { closed } = rawSocket();
    const r = await closed;
    expect(r.afterMs).toBeLessThan(6_000);
  });

  it("answers malformed HTTP, oversized headers and slow headers with an OpenAI-shaped error body", async () => {
    const garbage = await rawSocket("HELLO THERE\r\n\r\n").closed;
    expect(garbage.received).toMatch(/^HTTP\/1\.1 400 /);
    expect(jsonBody(garbage.received).error).toMatchObject({ type: "invalid_request_error", code: "bad_http_request" });

    const huge = await rawSocket(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`).closed;
    expect(huge.received).toMatch(/^HTTP\/1\.1 431 /);
    expect(jsonBody(huge.received).error.code).toBe("headers_too_large");

    const slow = await rawSocket("GET /health HTTP/1.1\r\nHost: x\r\n").closed;
    expect(slow.afterMs).toBeLessThan(8_000);
    if (slow.received) expect(jsonBody(slow.received).error.code).toBe("request_timeout");
  });

  it("caps connections, and serves again once the silent ones are closed", async () => {
    const held = Array.from({ length: 20 }, () => rawSocket());
    await new Promise((r) => setTimeout(r, 300));
    const extra = await rawSocket().closed;
    // Over the cap the connection is dropped at once rather than held.
    expect(extra.afterMs).toBeLessThan(1_500);
    await Promise.all(held.map((h) => h.closed));
    expect((await fetch(`${s.baseUrl}/health`)).status).toBe(200);
  });

  it("keeps an answered connection open longer than clients and proxies keep theirs, past the idle limit", async () => {
    const { socket, closed } = rawSocket();
    let received = "";
    socket.on("data", (d) => (received += d.toString()));
    const ask = async () => {
      received = "";
      socket.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
      await until("an answer", () => (/\r\n\r\n.*\}$/s.test(received) ? true : undefined), { seen: () => received });
      return received;
    };
    // The hint the official Node client reads, and longer than httpx keeps a connection (5 s) or a load balancer (60 s):
    // the client closes an idle connection first, never the server in the moment a request is sent on it.
    expect(await ask()).toMatch(/^HTTP\/1\.1 200 .*\r\nKeep-Alive: timeout=75\r\n/is);
    // Between answers the keep-alive time applies, not the limit on a silent socket (2 s here).
    await new Promise((r) => setTimeout(r, 2_500));
    expect(await ask()).toMatch(/^HTTP\/1\.1 200 /);
    socket.destroy();
    await closed;
  });

  it("defaults the cap to half the descriptor limit", () => {
    expect(defaultMaxConnections("/nonexistent")).toBe(512);
    expect(defaultMaxConnections()).toBeGreaterThanOrEqual(16);
  });
});
