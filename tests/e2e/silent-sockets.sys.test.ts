// Sockets that connect and never send a byte, against the real server process at its default timeouts: the server
// answers each 408 request_timeout once the headers timeout (20 s) is past, at Node's next connection check (every
// 30 s). Its sockets allow half-open connections, so after that answer its end stayed open (a descriptor held) for
// as long as the client kept its own: forever, for a client that never reads. Counted on the server's side.
import { mkdtempSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startMain } from "../helpers/process.js";
import { serverEnv } from "../helpers/server-testbed.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "obi-silent-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Sockets among a process's open descriptors (Linux). */
const socketsOf = (pid: number) =>
  readdirSync(`/proc/${pid}/fd`).filter((fd) => {
    try {
      return readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith("socket:");
    } catch {
      return false;
    }
  }).length;

describe.skipIf(process.platform !== "linux")("silent sockets at the default timeouts", () => {
  it("closes 200 sockets that never send a byte, each with a 408, and holds no descriptor for them", async () => {
    const s = await startMain(await serverEnv(dir), 60_000);
    const pid = s.child.pid!;
    const port = Number(new URL(s.baseUrl).port);
    const baseline = socketsOf(pid);
    const closed: Array<{ ms: number; answer: string }> = [];
    const sockets: net.Socket[] = [];
    const opened = Date.now();
    try {
      const held: net.Socket[] = [];
      for (let i = 0; i < 200; i++) {
        const socket = net.connect(port, "127.0.0.1");
        socket.on("error", () => {});
        // Half of them read (as a client does); the other half never do.
        if (i % 2 === 0) {
          let answer = "";
          socket.on("data", (d) => (answer += d));
          socket.once("close", () => closed.push({ ms: Date.now() - opened, answer }));
        } else held.push(socket);
        sockets.push(socket);
      }
      await expect.poll(() => socketsOf(pid), { timeout: 10_000 }).toBeGreaterThanOrEqual(baseline + 200);
      await expect.poll(() => closed.length, { timeout: 65_000, interval: 1_000 }).toBe(100);
      expect(Math.min(...closed.map((c) => c.ms))).toBeGreaterThanOrEqual(19_000);
      for (const c of closed) expect(c.answer).toMatch(/^HTTP\/1\.1 408 [\s\S]*"code":"request_timeout"/);
      // The server's ends of all 200 are gone, the never-read ones included.
      await expect.poll(() => socketsOf(pid), { timeout: 5_000 }).toBeLessThanOrEqual(baseline);
      expect((await fetch(`${s.baseUrl}/health`)).status).toBe(200);
    } finally {
      for (const socket of sockets) socket.destroy();
      s.child.kill("SIGTERM");
      await s.exited;
    }
  }, 120_000);
});
