import { describe, expect, it } from "vitest";
import { backoffMs, isRetryableStatus, RETRY_BASE_MS, RETRY_CAP_MS, retryAfterMs } from "../../upstream/backoff.js";
import { BaseUrls, COOLDOWN_MS } from "../../upstream/base-urls.js";

describe("backoff and Retry-After", () => {
  it("draws full jitter under an exponential bound, capped", () => {
    expect(backoffMs(1, () => 0.999)).toBe(Math.floor(0.999 * RETRY_BASE_MS));
    expect(backoffMs(3, () => 0.5)).toBe(2 * RETRY_BASE_MS);
    expect(backoffMs(30, () => 0.5)).toBe(RETRY_CAP_MS / 2);
    expect(backoffMs(4, () => 0)).toBe(0);
  });

  it("reads Retry-After as seconds or as an HTTP date", () => {
    expect(retryAfterMs("2")).toBe(2000);
    expect(retryAfterMs("0.5")).toBe(500);
    const now = Date.parse("2026-11-22T10:00:00Z");
    expect(retryAfterMs("Sun, 22 Nov 2026 10:00:03 GMT", now)).toBe(3000);
    expect(retryAfterMs(undefined)).toBeUndefined();
    expect(retryAfterMs("soon")).toBeUndefined();
    expect(retryAfterMs("-4")).toBe(0);
  });

  it("retries 408, 429 and 5xx, never another 4xx", () => {
    expect([408, 429, 500, 502, 503, 504].every(isRetryableStatus)).toBe(true);
    expect([400, 401, 404, 413, 422].some(isRetryableStatus)).toBe(false);
  });
});

describe("BaseUrls", () => {
  it("spreads requests over healthy URLs and takes a failing one out for a cooldown", () => {
    let t = 0;
    const urls = new BaseUrls(["http://a/v1", "http://b/v1"], () => t);
    const picks = [urls.pick(), urls.pick()];
    expect(new Set(picks)).toEqual(new Set(["http://a/v1", "http://b/v1"]));
    urls.done("http://a/v1", false);
    urls.done("http://b/v1", true);
    expect([urls.pick(), urls.pick(), urls.pick()]).toEqual(["http://b/v1", "http://b/v1", "http://b/v1"]);
    t += COOLDOWN_MS + 1;
    expect(urls.status().find((s) => s.url === "http://a/v1")).toMatchObject({ cooling_down: false, failures: 1 });
    expect(urls.pick()).toBe("http://a/v1");
  });

  it("with every URL cooling down, uses the one due back first", () => {
    let t = 0;
    const urls = new BaseUrls(["http://a/v1", "http://b/v1"], () => t);
    urls.done(urls.pick(), false);
    t += 1000;
    urls.done(urls.pick(), false);
    const first = urls.status().find((s) => s.failures === 1 && s.cooling_down)!;
    expect(urls.pick()).toBe(first.url);
  });
});
