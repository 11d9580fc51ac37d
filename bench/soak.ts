// The reliability campaign behind docs/reliability.md's figures: the real server process, tried the way the most
// demanding reviewers try it. Three parts, each checked to the request:
//   crash  — kill -9 at random moments while batches run, restart on the same BATCH_DIR each time;
//   fuzz   — seeded random bad input to every route; every answer must be a 4xx with an OpenAI-shaped error;
//   load   — many clients at once, reading and submitting (retrying on 429) for a fixed time.
// Every accepted batch must end completed with each custom_id exactly once. `npm run soak [-- --quick]`.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { isFinal } from "../testkit/batch-client.js";
import { fuzzRequests } from "../testkit/fuzz.js";
import { testModelPath } from "../testkit/model.js";
import { type BenchServer, startServer } from "./server.js";
import { batchEnd, createBatch, getBatch } from "./timed-batches.js";

const { values } = parseArgs({ options: { quick: { type: "boolean", default: false }, seed: { type: "string", default: "1" } } });
const plan = values.quick
  ? { kills: 4, crashRequests: 600, fuzz: 300, clients: 20, loadSeconds: 30 }
  : { kills: 20, crashRequests: 3000, fuzz: 1000, clients: 50, loadSeconds: 180 };
const seed = Number(values.seed);
const modelPath = await testModelPath();
const env = { THREADS: "1", SEQUENCES: "4", CONTEXT_SIZE: "512" };
const log = (msg: string) => console.error(`[soak] ${msg}`);

function jsonl(n: number, prefix: string, maxTokens: number): string {
  let out = "";
  for (let i = 0; i < n; i++) {
    const body = { prompt: `Once upon a time, ${prefix} ${i}:`, max_tokens: maxTokens, temperature: 1 };
    out += `${JSON.stringify({ custom_id: `${prefix}-${i}`, method: "POST", url: "/v1/completions", body })}\n`;
  }
  return out;
}

async function upload(base: string, content: string): Promise<string> {
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", new Blob([content]), "in.jsonl");
  const res = await fetch(`${base}/v1/files`, { method: "POST", body: form });
  if (!res.ok) throw new Error(`upload: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { id: string }).id;
}

/** Lost and duplicated custom_ids of a finished batch, read back through the API. */
async function audit(base: string, id: string, expected: string[]): Promise<{ status: string; lost: number; duplicated: number }> {
  const b = await getBatch(base, id);
  const seen = new Map<string, number>();
  for (const fileId of [b.output_file_id, b.error_file_id]) {
    if (!fileId) continue;
    const text = await (await fetch(`${base}/v1/files/${fileId}/content`)).text();
    for (const line of text.split("\n").filter(Boolean)) {
      const cid = JSON.parse(line).custom_id as string;
      seen.set(cid, (seen.get(cid) ?? 0) + 1);
    }
  }
  const lost = expected.filter((c) => !seen.has(c)).length;
  const duplicated = [...seen.values()].filter((n) => n > 1).length;
  return { status: b.status, lost, duplicated };
}

async function crashCampaign() {
  const dir = mkdtempSync(path.join(os.tmpdir(), "obi-soak-crash-"));
  const start = () => startServer(modelPath, { ...env, BATCH_DIR: dir, SPOT_CAPACITY: "1", DEDICATED_CAPACITY: "1" });
  let s = await start();
  const per = plan.crashRequests / 3;
  const batches: { id: string; ids: string[] }[] = [];
  for (const name of ["a", "b", "c"]) {
    const file = await upload(s.baseUrl, jsonl(per, name, 48));
    batches.push({ id: (await createBatch(s.baseUrl, file)).id, ids: Array.from({ length: per }, (_, i) => `${name}-${i}`) });
  }
  // Each kill lands while a batch runs (the moment drawn at random); the campaign ends early if they all finish.
  let kills = 0;
  while (kills < plan.kills) {
    await new Promise((r) => setTimeout(r, 300 + Math.random() * 1500));
    const states = await Promise.all(batches.map((b) => getBatch(s.baseUrl, b.id)));
    if (!states.some((b) => b.status === "in_progress")) {
      if (states.every(isFinal)) break;
      continue;
    }
    await s.kill9();
    kills++;
    s = await start();
  }
  const rows = [];
  for (const b of batches) {
    await batchEnd(s.baseUrl, b.id, { everyMs: 200 });
    rows.push(await audit(s.baseUrl, b.id, b.ids));
  }
  await s.stop();
  rmSync(dir, { recursive: true, force: true });
  return {
    kills,
    requests: plan.crashRequests,
    completed: rows.filter((r) => r.status === "completed").length,
    lost: rows.reduce((n, r) => n + r.lost, 0),
    duplicated: rows.reduce((n, r) => n + r.duplicated, 0),
  };
}

async function fuzzCampaign(s: BenchServer) {
  // A batch stored before the fuzz: it must come out of it untouched.
  const ref = await createBatch(s.baseUrl, await upload(s.baseUrl, jsonl(8, "ref", 4)));
  const before = await batchEnd(s.baseUrl, ref.id, { everyMs: 100 });
  const tally = { tried: 0, refused4xx: 0, accepted: 0, server5xx: 0, unshaped: 0 };
  for (const req of fuzzRequests(plan.fuzz, seed)) {
    tally.tried++;
    const res = await fetch(`${s.baseUrl}${req.path}`, { method: req.method, headers: req.headers, body: req.body });
    const text = await res.text();
    if (res.status >= 500) tally.server5xx++;
    else if (res.status >= 400) {
      tally.refused4xx++;
      if (!isOpenAIError(text)) tally.unshaped++;
    } else tally.accepted++;
  }
  const after = await getBatch(s.baseUrl, ref.id);
  const health = (await fetch(`${s.baseUrl}/health`)).status;
  return { ...tally, healthAfter: health, storedBatchIntact: JSON.stringify(after) === JSON.stringify(before) };
}

function isOpenAIError(text: string): boolean {
  try {
    const e = JSON.parse(text).error;
    return typeof e?.message === "string" && typeof e.type === "string" && "param" in e && "code" in e;
  } catch {
    return false;
  }
}

async function loadCampaign(s: BenchServer) {
  const base = s.baseUrl;
  const file = await upload(base, jsonl(4, "load", 8));
  const accepted: string[] = [];
  const latencies: number[] = [];
  const tally = { calls: 0, answered429: 0, server5xx: 0 };
  const call = async (url: string, init?: RequestInit) => {
    const t = performance.now();
    const res = await fetch(`${base}${url}`, init);
    const text = await res.text();
    latencies.push(performance.now() - t);
    tally.calls++;
    if (res.status === 429) tally.answered429++;
    if (res.status >= 500) tally.server5xx++;
    return { status: res.status, text };
  };
  const create = { method: "POST", headers: { "content-type": "application/json" } };
  const body = JSON.stringify({ input_file_id: file, endpoint: "/v1/completions", completion_window: "24h" });
  const until = Date.now() + plan.loadSeconds * 1000;
  // One client in five submits (backing off on 429 as told), the rest read what a dashboard reads.
  const client = async (i: number) => {
    for (let n = 0; Date.now() < until; n++) {
      if (i % 5 === 0) {
        const res = await call("/v1/batches", { ...create, body });
        if (res.status === 200) accepted.push(JSON.parse(res.text).id);
        else await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      const reads = ["/v1/batches?limit=20", "/v1/files", `/v1/batches/${accepted.at(-1) ?? "batch_none"}`];
      await call(reads[n % reads.length]);
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: plan.clients }, (_, i) => client(i)));
  const seconds = (performance.now() - t0) / 1000;
  let completed = 0;
  let lost = 0;
  let duplicated = 0;
  for (const id of accepted) {
    await batchEnd(base, id, { everyMs: 200 });
    const r = await audit(base, id, ["load-0", "load-1", "load-2", "load-3"]);
    if (r.status === "completed") completed++;
    lost += r.lost;
    duplicated += r.duplicated;
  }
  latencies.sort((x, y) => x - y);
  return {
    clients: plan.clients,
    seconds: Math.round(seconds),
    calls: tally.calls,
    callsPerSecond: Math.round(tally.calls / seconds),
    p95Ms: Number(latencies[Math.floor(latencies.length * 0.95)]?.toFixed(1)),
    answered429: tally.answered429,
    server5xx: tally.server5xx,
    batchesAccepted: accepted.length,
    batchesCompleted: completed,
    lost,
    duplicated,
  };
}

log(`model ${modelPath}; ${values.quick ? "quick" : "full"} plan ${JSON.stringify(plan)}`);
log("crash: kill -9 at random moments");
const crash = await crashCampaign();
log(JSON.stringify(crash));
const server = await startServer(modelPath, { ...env, MAX_QUEUE_DEPTH: "20" });
log("fuzz: seeded bad input to every route");
const fuzz = await fuzzCampaign(server);
log(JSON.stringify(fuzz));
log(`load: ${plan.clients} clients for ${plan.loadSeconds} s`);
const load = await loadCampaign(server);
log(JSON.stringify(load));
await server.stop();

const ok =
  crash.lost + crash.duplicated + load.lost + load.duplicated + fuzz.server5xx + fuzz.unshaped + load.server5xx === 0 &&
  crash.completed === 3 &&
  load.batchesCompleted === load.batchesAccepted &&
  fuzz.storedBatchIntact &&
  fuzz.healthAfter === 200;
console.log(`| part | tried | outcome | lost | duplicated |
|---|---|---|---|---|
| kill -9 | ${crash.kills} kills, each mid-batch, over ${crash.requests} requests in 3 batches | ${crash.completed}/3 batches completed | ${crash.lost} | ${crash.duplicated} |
| fuzz | ${fuzz.tried} bad requests (seed ${seed}) | ${fuzz.refused4xx} refused 4xx (${fuzz.unshaped} not OpenAI-shaped), ${fuzz.accepted} accepted, ${fuzz.server5xx} 5xx; stored batch intact: ${fuzz.storedBatchIntact} | 0 | 0 |
| load | ${load.clients} clients × ${load.seconds} s: ${load.calls} calls (${load.callsPerSecond}/s), p95 ${load.p95Ms} ms | ${load.answered429} answered 429, ${load.server5xx} 5xx; ${load.batchesCompleted}/${load.batchesAccepted} batches completed | ${load.lost} | ${load.duplicated} |`);
console.log(ok ? "soak: nothing lost, nothing duplicated, no 5xx" : "soak: FAILED (see above)");
process.exitCode = ok ? 0 : 1;
