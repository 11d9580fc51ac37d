// API_KEYS on the real server process: every /v1 route needs a key, each key sees only its own files
// and batches (lists and their pages included), health and docs stay open, and no key ever reaches
// the process's log. (Without API_KEYS the start-up log says the API is open: crash-recovery.sys.test.ts.)
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionJsonl } from "../../testkit/workload.js";
import { createBatch, isFinal, logLines, pollBatch, uploadJsonl } from "../helpers/http-batches.js";
import type { ServerProcess } from "../helpers/process.js";
import { serverTestbed } from "../helpers/server-testbed.js";

const KEY_A = "sk-e2e-alpha-3b9f01c7d2e4";
const KEY_B = "sk-e2e-bravo-8c4d2a6f1e03";
const WRONG = "sk-e2e-wrong-5e7a9b1c3d0f";
const as = (key: string) => ({ authorization: `Bearer ${key}` });

const bed = serverTestbed("keys", { API_KEYS: `${KEY_A},${KEY_B}` });
let s: ServerProcess;
beforeAll(async () => {
  s = await bed.start();
});
afterAll(async () => {
  s?.child.kill("SIGTERM");
  await s?.exited;
});

const get = (p: string, headers: Record<string, string> = {}) => fetch(`${s.baseUrl}${p}`, { headers });

/** Every id of a list, walking its pages one object at a time with `after`. */
async function allPages(route: "/v1/files" | "/v1/batches", key: string): Promise<string[]> {
  const ids: string[] = [];
  for (let after = ""; ; ) {
    const page = (await (await get(`${route}?limit=1${after ? `&after=${after}` : ""}`, as(key))).json()) as any;
    ids.push(...page.data.map((o: any) => o.id));
    if (!page.has_more) return ids;
    after = page.last_id;
  }
}

describe("API keys on the server process", () => {
  it("says at start-up that authentication is on", () => {
    const msgs = logLines(s.output()).map((l) => l.msg);
    expect(msgs).toContain("API key authentication on");
    expect(msgs.some((m) => /OPEN/.test(m))).toBe(false);
  });

  it("answers 401 on /v1 without a key or with a wrong one", async () => {
    const attempts = [
      get("/v1/files"),
      get("/v1/batches"),
      get("/v1/batches/batch_6a1f0c2e9b7d4e3f8a5b1c0d"),
      get("/v1/files", as(WRONG)),
      get("/v1/files", { authorization: KEY_A }),
      fetch(`${s.baseUrl}/v1/batches`, { method: "POST", headers: { "content-type": "application/json", ...as(WRONG) }, body: "{}" }),
    ];
    // OpenAI's 401: invalid_request_error; code invalid_api_key for a wrong key, null for none.
    const codes = [null, null, null, "invalid_api_key", null, "invalid_api_key"];
    for (const [i, res] of (await Promise.all(attempts)).entries()) {
      expect(res.status).toBe(401);
      expect(((await res.json()) as any).error).toMatchObject({ type: "invalid_request_error", code: codes[i] });
    }
  });

  it("checks the key before reading a body: malformed or huge bodies without a key get 401, never parsed", async () => {
    const post = (body: string, headers: Record<string, string> = {}) =>
      fetch(`${s.baseUrl}/v1/batches`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
    const malformed = await post("{not json");
    expect(malformed.status).toBe(401);
    expect(((await malformed.json()) as any).error).toMatchObject({ type: "invalid_request_error", code: null });
    // 15 MB of JSON without a key: refused without being buffered, and /health answers meanwhile.
    const big = `{"input_file_id":"${"x".repeat(15 * 1024 * 1024)}"}`;
    const [refused, health] = await Promise.all([post(big), get("/health")]);
    expect(refused.status).toBe(401);
    expect(health.status).toBe(200);
    // With a key the malformed body is the error.
    const withKey = await post("{not json", as(KEY_A));
    expect(withKey.status).toBe(400);
    expect(((await withKey.json()) as any).error.code).toBe("invalid_json");
    // Routes other than batch creation take small bodies only.
    const cancel = await fetch(`${s.baseUrl}/v1/batches/batch_6a1f0c2e9b7d4e3f8a5b1c0d/cancel`, {
      method: "POST",
      headers: { "content-type": "application/json", ...as(KEY_A) },
      body: `{"pad":"${"y".repeat(100 * 1024)}"}`,
    });
    expect(cancel.status).toBe(413);
  });

  it("keeps /health, /ready, /docs and /openapi.json open", async () => {
    for (const p of ["/health", "/ready", "/docs/", "/openapi.json"]) expect((await get(p)).status, p).toBe(200);
  });

  it("shows each key only its own files and batches, lists and pages included", async () => {
    const mine: Record<string, { files: string[]; batches: string[] }> = { a: { files: [], batches: [] }, b: { files: [], batches: [] } };
    for (const [who, key, n] of [
      ["a", KEY_A, 3],
      ["b", KEY_B, 2],
    ] as const) {
      for (let i = 0; i < n; i++) {
        const f = await uploadJsonl(s.baseUrl, completionJsonl(2, { prefix: `${who}${i}` }), as(key));
        mine[who].files.push(f.id);
        mine[who].batches.push((await createBatch(s.baseUrl, f.id, as(key))).body.id);
      }
    }
    const done = await Promise.all(mine.a.batches.map((id) => pollBatch(s.baseUrl, id, isFinal, 30_000, as(KEY_A))));
    await Promise.all(mine.b.batches.map((id) => pollBatch(s.baseUrl, id, isFinal, 30_000, as(KEY_B))));

    // Another key's object is 404 on every route, exactly like one that does not exist.
    const [file, batch, output] = [mine.a.files[0], mine.a.batches[0], done[0].output_file_id];
    for (const p of [
      `/v1/files/${file}`,
      `/v1/files/${file}/content`,
      `/v1/files/${output}/content`,
      `/v1/batches/${batch}`,
      `/v1/batches/${batch}/results`,
    ]) {
      expect((await get(p, as(KEY_B))).status, p).toBe(404);
    }
    const post = (p: string, method = "POST") => fetch(`${s.baseUrl}${p}`, { method, headers: as(KEY_B) });
    expect((await post(`/v1/batches/${batch}/cancel`)).status).toBe(404);
    expect((await post(`/v1/files/${file}`, "DELETE")).status).toBe(404);
    expect((await createBatch(s.baseUrl, file, as(KEY_B))).status).toBe(404);

    // Lists, page by page: B sees exactly its own; A sees its own uploads and outputs and none of B's.
    expect((await allPages("/v1/batches", KEY_B)).sort()).toEqual([...mine.b.batches].sort());
    expect((await allPages("/v1/batches", KEY_A)).sort()).toEqual([...mine.a.batches].sort());
    const bFiles = await allPages("/v1/files", KEY_B);
    const aFiles = await allPages("/v1/files", KEY_A);
    expect(bFiles).toEqual(expect.arrayContaining(mine.b.files));
    expect(aFiles).toEqual(expect.arrayContaining([...mine.a.files, ...done.map((b) => b.output_file_id)]));
    expect(aFiles.filter((id) => bFiles.includes(id))).toEqual([]);
    // Another key's id as a cursor says no more than a made-up one would.
    const foreign = (await (await get(`/v1/batches?after=${batch}`, as(KEY_B))).json()) as any;
    const madeUp = (await (await get(`/v1/batches?after=batch_000000000000000000000000`, as(KEY_B))).json()) as any;
    expect(foreign.error.message.replace(batch, "ID")).toBe(madeUp.error.message.replace("batch_000000000000000000000000", "ID"));
  });

  it("never writes a key to the log", async () => {
    const out = s.output();
    expect(logLines(out).length).toBeGreaterThan(20);
    for (const secret of [KEY_A, KEY_B, WRONG]) expect(out).not.toContain(secret);
    expect(out.toLowerCase()).not.toContain("authorization");
  });
});
