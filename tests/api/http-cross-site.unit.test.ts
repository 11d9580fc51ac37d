// The cross-site guard on its own: what a browser sends for a page of another origin changes nothing unless
// CORS_ORIGINS lists that origin; same-origin pages and clients that are not browsers pass.
import express from "express";
import request from "supertest";
import { describe, expect, it } from "vitest";
import { crossSiteGuard, fromAnotherOrigin, loopbackOnly, noFraming, rebindingGuard } from "../../api/http/cross-site.js";
import { errorHandler } from "../../api/http/error-handler.js";

const ALLOWED = "https://app.example.com";

function app() {
  const a = express();
  a.use(crossSiteGuard([ALLOWED]));
  a.post("/v1/batches/pause", (_req, res) => {
    res.json({ paused: true });
  });
  a.get("/v1/batches", (_req, res) => {
    res.json({ object: "list" });
  });
  a.use(errorHandler({ maxFileBytes: 1 }));
  return a;
}

const post = (headers: Record<string, string>) => request(app()).post("/v1/batches/pause").set(headers);

describe("state-changing requests from another origin", () => {
  it.each([
    ["Sec-Fetch-Site cross-site", { "sec-fetch-site": "cross-site", origin: "https://evil.example" }],
    ["Sec-Fetch-Site same-site (another port of this host)", { "sec-fetch-site": "same-site", origin: "http://127.0.0.1:1" }],
    ["Sec-Fetch-Site cross-site without an Origin", { "sec-fetch-site": "cross-site" }],
    ["an Origin of another host (a browser without Sec-Fetch-Site)", { origin: "https://evil.example" }],
    ["Origin null (a sandboxed frame, a file)", { origin: "null" }],
  ])("refuses %s: 403 origin_not_allowed, OpenAI-shaped", async (_what, headers) => {
    const res = await post(headers);
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ type: "permission_error", code: "origin_not_allowed", param: null });
    expect(res.headers["access-control-allow-origin"]).toBeUndefined();
  });

  it.each([
    ["no Origin and no Sec-Fetch-Site (curl, the SDKs)", {}],
    ["Sec-Fetch-Site same-origin (the console, Swagger UI)", { "sec-fetch-site": "same-origin", origin: "http://127.0.0.1:8000" }],
    ["Sec-Fetch-Site none (typed by the user)", { "sec-fetch-site": "none" }],
  ])("lets %s through", async (_what, headers) => {
    expect((await post(headers)).status).toBe(200);
  });

  it("lets a same-origin write through from a browser without Sec-Fetch-Site (Origin matches the Host)", async () => {
    const res = await request(app()).post("/v1/batches/pause").set("host", "localhost:8000").set("origin", "http://localhost:8000");
    expect(res.status).toBe(200);
  });

  it("lets reads through (the browser keeps the answer from the page) without CORS headers", async () => {
    const res = await request(app()).get("/v1/batches").set({ "sec-fetch-site": "cross-site", origin: "https://evil.example" });
    expect(res.status).toBe(200);
    expect(res.headers["access-control-allow-origin"]).toBeUndefined();
  });
});

describe("CORS_ORIGINS", () => {
  it("answers a listed origin's preflight, and its requests carry the CORS headers", async () => {
    const pre = await request(app())
      .options("/v1/batches/pause")
      .set({ origin: ALLOWED, "access-control-request-method": "POST", "access-control-request-headers": "authorization,content-type" });
    expect(pre.status).toBe(204);
    expect(pre.headers["access-control-allow-origin"]).toBe(ALLOWED);
    expect(pre.headers["access-control-allow-methods"]).toMatch(/POST/);
    expect(pre.headers["access-control-allow-headers"]).toMatch(/authorization/);
    const res = await post({ "sec-fetch-site": "cross-site", origin: ALLOWED });
    expect(res.status).toBe(200);
    expect(res.headers["access-control-allow-origin"]).toBe(ALLOWED);
    expect(res.headers["access-control-expose-headers"]).toMatch(/x-request-id/);
    expect(res.headers.vary).toMatch(/Origin/);
  });

  it("refuses the preflight of an origin it does not list (another scheme or port is another origin)", async () => {
    for (const origin of ["https://evil.example", "http://app.example.com", "https://app.example.com:8443"]) {
      const pre = await request(app()).options("/v1/batches/pause").set({ origin, "access-control-request-method": "POST" });
      expect(pre.status, origin).toBe(403);
      expect(pre.headers["access-control-allow-origin"], origin).toBeUndefined();
      expect(pre.body.error.code).toBe("origin_not_allowed");
    }
  });
});

describe("fromAnotherOrigin", () => {
  const req = (headers: Record<string, string>) => ({ get: (h: string) => headers[h.toLowerCase()] });
  it("reads Sec-Fetch-Site first, then Origin against Host", () => {
    expect(fromAnotherOrigin(req({ "sec-fetch-site": "same-origin", origin: "https://evil.example", host: "x" }))).toBe(false);
    expect(fromAnotherOrigin(req({ origin: "http://127.0.0.1:8001", host: "127.0.0.1:8000" }))).toBe(true);
    expect(fromAnotherOrigin(req({ origin: "http://127.0.0.1:8000", host: "127.0.0.1:8000" }))).toBe(false);
    expect(fromAnotherOrigin(req({ origin: "not a url", host: "127.0.0.1:8000" }))).toBe(true);
    expect(fromAnotherOrigin(req({ host: "127.0.0.1:8000" }))).toBe(false);
  });
});

describe("a name pointed at this machine (DNS rebinding), on an open API listening on loopback", () => {
  function app(guard: boolean) {
    const a = express();
    a.use(noFraming, rebindingGuard(guard, [ALLOWED]));
    a.get("/v1/batches", (_req, res) => {
      res.json({ object: "list" });
    });
    a.use(errorHandler({ maxFileBytes: 1 }));
    return a;
  }
  // A browser sends no Sec-Fetch-Site to a plain-http name: the request looks like any client's.
  const sent = (host: string, guard = true) => request(app(guard)).get("/v1/batches").set({ host });

  it.each(["evil.example:8000", "attacker.test", "127.0.0.1.nip.io:8000"])(
    "refuses a request sent to %s: 403 host_not_allowed",
    async (host) => {
      const res = await sent(host);
      expect(res.status).toBe(403);
      expect(res.body.error).toMatchObject({ type: "permission_error", code: "host_not_allowed" });
    },
  );

  it.each(["127.0.0.1:8000", "localhost:8000", "[::1]:8000", "10.0.0.7:8000", "console.localhost", "app.example.com"])(
    "serves %s (an address, localhost, a host CORS_ORIGINS lists)",
    async (host) => {
      expect((await sent(host)).status).toBe(200);
    },
  );

  it("serves any name where there are keys or the server listens beyond loopback (the guard is off)", async () => {
    expect((await sent("gpu-box.lan:8000", false)).status).toBe(200);
  });

  it("knows a loopback address when HOST names one", () => {
    for (const host of ["127.0.0.1", "127.0.0.2", "::1", "localhost"]) expect(loopbackOnly(host), host).toBe(true);
    for (const host of ["0.0.0.0", "::", "10.0.0.7", "gpu-box"]) expect(loopbackOnly(host), host).toBe(false);
  });

  it("lets no page of another origin frame the service's pages", async () => {
    const res = await sent("127.0.0.1:8000");
    expect(res.headers["x-frame-options"]).toBe("SAMEORIGIN");
    expect(res.headers["content-security-policy"]).toBe("frame-ancestors 'self'");
  });
});
