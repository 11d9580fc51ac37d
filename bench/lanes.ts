// The two lanes under load: a batch runs while a client sends interactive requests at a fixed rate (streamed
// completions, ~200 prompt tokens, 64 generated), and the interactive requests' time to first token and the
// batch's throughput are measured, against the same batch alone and the same client on the idle service; then the
// batch once more with the requests answered as lines of it, which estimates what their own work leaves the batch. The peer
// serves the same mix: llama-server with the batch fed at its slots minus one in flight, the client beside it.
// Every figure comes from one run of this part, on one model, one process at a time.
import path from "node:path";
import { Agent } from "undici";
import { againOnClosedSocket } from "../testkit/closed-socket.js";
import { type PeerRequest, startLlamaServer } from "../testkit/llama-server.js";
import { completionLines, prompt, writeBatchFile } from "../testkit/workload.js";
import { type LanesWork, workText } from "./lanes-work.js";
import { SENTENCES } from "./peer.js";
import { engineBuild, startServer } from "./server.js";
import { createBatch, uploadFile, waitForTimedBatch } from "./timed-batches.js";

export interface LanesPlan {
  /** Lines of the batch, and the tokens each generates. */
  lines: number;
  lineTokens: number;
  /** Interactive requests a second, and the tokens each generates. */
  rate: number;
  interactiveTokens: number;
  /** Sentences before each interactive prompt's own opening: its length in the model's tokens (promptTokens says). */
  promptSentences: number;
  /** Interactive requests sent to the idle service (the baseline's time to first token). */
  idleRequests: number;
  /** llama-server's slots (the batch is fed at one fewer), and its threads. */
  slots: number;
  threads: number;
}

export interface LaneRun {
  /** The batch's lines a second (null: no batch ran). */
  linesPerSecond: number | null;
  batchSeconds: number | null;
  /** Over the requests answered; `refused`: those the server turned away (429 or 503: its queue was full). */
  ttft: { p50Ms: number; p99Ms: number; n: number; refused?: number } | null;
  /** The service's batch lines that gave their sequence to an interactive request (its /metrics). */
  preemptions?: number;
  /** The service's engine build (patched or prebuilt): ENGINE_BUILD=auto falls back to prebuilt without a word here. */
  build?: string;
}

export interface LanesResult {
  model: string;
  plan: LanesPlan;
  promptTokens: number;
  service: { idle: LaneRun; alone: LaneRun; mixed: LaneRun };
  work?: LanesWork;
  peer: { idle: LaneRun; alone: LaneRun; mixed: LaneRun };
}

/** A story prompt of `sentences` sentences and an opening for interactive request `i`, each different. */
function interactivePrompt(i: number, sentences: number): string {
  const text = Array.from({ length: sentences }, (_, k) => SENTENCES[(i + k * 3) % SENTENCES.length]).join(" ");
  return `${text} ${prompt(1000 + i)}`;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];

/**
 * No bound on the wait for an answer's headers or its next bytes: a server loaded past what it can serve (four
 * requests a second at the qwen2.5-0.5b size) keeps requests queued for minutes, and fetch's default of five
 * minutes ended the run there instead of measuring it.
 */
const patient = new Agent({ headersTimeout: 0, bodyTimeout: 0 });
/** fetch through `patient`: Node's fetch takes undici's `dispatcher`, which the DOM's RequestInit type lacks. */
const patientFetch = (url: string, init: RequestInit) => fetch(url, { ...init, dispatcher: patient } as RequestInit);

/** llama-server's requests: many connections pooled after the interactive streams, so several tries. */
const againOnClosed = (send: () => Promise<Response>) => againOnClosedSocket(send, 5);

/** Time to the first streamed text of a completions request, in ms; null where the server turned it away. */
async function firstToken(baseUrl: string, plan: LanesPlan, i: number, tokens: number): Promise<number | null> {
  const started = performance.now();
  const res = await againOnClosed(() =>
    patientFetch(`${baseUrl}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "m",
        prompt: interactivePrompt(i, plan.promptSentences),
        max_tokens: tokens,
        temperature: 0,
        stream: true,
      }),
    }),
  );
  // A full queue's refusal is the server shedding load as it should; the run goes on and counts it.
  if (res.status === 429 || res.status === 503) {
    await res.body?.cancel();
    return null;
  }
  if (!res.ok || !res.body) throw new Error(`interactive request: HTTP ${res.status} ${await res.text()}`);
  let first: number | undefined;
  let buffered = "";
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    buffered += decoder.decode(chunk as Uint8Array, { stream: true });
    for (let end = buffered.indexOf("\n\n"); end !== -1; end = buffered.indexOf("\n\n")) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = event
        .split("\n")
        .find((l) => l.startsWith("data: "))
        ?.slice(6);
      if (first === undefined && data && data !== "[DONE]" && JSON.parse(data).choices?.[0]?.text) first = performance.now();
    }
  }
  if (first === undefined) throw new Error("interactive request: no text streamed");
  return first - started;
}

/** Sends interactive requests at `rate` a second until `until` resolves (or `count` are sent); their TTFTs. */
async function interactiveClient(baseUrl: string, plan: LanesPlan, opts: { count?: number; until?: Promise<unknown> }) {
  let done = false;
  void opts.until?.then(() => (done = true));
  const waits: Array<Promise<number | null>> = [];
  const started = performance.now();
  for (let i = 0; !done && (opts.count === undefined || i < opts.count); i++) {
    const wait = firstToken(baseUrl, plan, i, plan.interactiveTokens);
    // Handled here so that a failure ends the run through Promise.all below (and its server is stopped), not as an
    // unhandled rejection while later requests are still being sent.
    wait.catch(() => {});
    waits.push(wait);
    const next = started + ((i + 1) * 1000) / plan.rate;
    const pause = new Promise((r) => setTimeout(r, Math.max(0, next - performance.now())));
    await (opts.until ? Promise.race([pause, opts.until]) : pause);
  }
  const all = await Promise.all(waits);
  const sorted = all.filter((ms): ms is number => ms !== null).sort((a, b) => a - b);
  return {
    p50Ms: percentile(sorted, 50) ?? Number.NaN,
    p99Ms: percentile(sorted, 99) ?? Number.NaN,
    n: sorted.length,
    refused: all.length - sorted.length,
  };
}

function batchLines(plan: LanesPlan) {
  return completionLines(plan.lines, { maxTokens: plan.lineTokens, prompt }).map((l) => ({
    ...l,
    body: { ...l.body, temperature: 1, seed: 7 },
  }));
}

/** The batch's lines with `requests` interactive requests as lines spread through them (the batch orders them its own way). */
function linesWithRequests(plan: LanesPlan, requests: number) {
  const lines = batchLines(plan);
  const mixed: Array<ReturnType<typeof batchLines>[number]> = [];
  let r = 0;
  lines.forEach((line, i) => {
    mixed.push(line);
    for (; r < requests && r * lines.length < (i + 1) * requests; r++)
      mixed.push({
        ...line,
        custom_id: `request-${r}`,
        body: { prompt: interactivePrompt(r, plan.promptSentences), max_tokens: plan.interactiveTokens, temperature: 0, seed: 7 },
      });
  });
  return mixed;
}

/** The batch through the service, and beside it (with `rate`) the interactive client; `requests`: those as lines of it. */
async function serviceRun(modelPath: string, plan: LanesPlan, interactive: boolean, requests = 0): Promise<LaneRun> {
  const server = await startServer(modelPath, { ...JSON.parse(process.env.BENCH_SERVICE_ENV ?? "{}") });
  try {
    await firstToken(server.baseUrl, plan, 0, 4);
    const lines = linesWithRequests(plan, requests);
    const file = path.join(server.batchDir, "lanes.jsonl");
    await writeBatchFile(file, lines);
    const t0 = performance.now();
    const batch = await createBatch(server.baseUrl, await uploadFile(server.baseUrl, file));
    const ended = waitForTimedBatch(server.baseUrl, batch.id, 25, { folder: path.join(server.batchDir, batch.id), lines: lines.length });
    const ttft = interactive ? await interactiveClient(server.baseUrl, plan, { until: ended }) : null;
    const { batch: final, seenAt } = await ended;
    if (final.status !== "completed" || final.request_counts.failed > 0)
      throw new Error(`lanes batch ended ${final.status} ${JSON.stringify(final.request_counts)}`);
    const seconds = (seenAt - t0) / 1000;
    return {
      linesPerSecond: lines.length / seconds,
      batchSeconds: seconds,
      ttft,
      preemptions: await preemptions(server.baseUrl),
      build: await engineBuild(server.baseUrl),
    };
  } finally {
    await server.stop();
  }
}

async function preemptions(baseUrl: string): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const sample = /^obi_sync_lane_preemptions\{[^}]*\} (\d+)/m.exec(text);
  return sample ? Number(sample[1]) : 0;
}

async function serviceIdle(modelPath: string, plan: LanesPlan): Promise<LaneRun> {
  const server = await startServer(modelPath, { ...JSON.parse(process.env.BENCH_SERVICE_ENV ?? "{}") });
  try {
    await firstToken(server.baseUrl, plan, 0, 4);
    const ttft = await interactiveClient(server.baseUrl, plan, { count: plan.idleRequests });
    return { linesPerSecond: null, batchSeconds: null, ttft, build: await engineBuild(server.baseUrl) };
  } finally {
    await server.stop();
  }
}

/** llama-server: the batch fed at slots - 1 in flight (one slot kept for the interactive client), the client beside it. */
async function peerRun(binary: string, modelPath: string, plan: LanesPlan, mode: "idle" | "alone" | "mixed"): Promise<LaneRun> {
  // Its HTTP threads default to slots + 2, and a connection past them is closed: the interactive requests beside the
  // batch's 15 (at 4 a second, a score of them streaming at once) need more.
  const http = ["--threads-http", String(plan.slots + 64)];
  const server = await startLlamaServer(binary, modelPath, { parallel: plan.slots, threads: plan.threads, ctxPerSlot: 512 }, http);
  try {
    await firstToken(server.baseUrl, plan, 0, 4);
    if (mode === "idle")
      return {
        linesPerSecond: null,
        batchSeconds: null,
        ttft: await interactiveClient(server.baseUrl, plan, { count: plan.idleRequests }),
      };
    const requests: PeerRequest[] = batchLines(plan).map((l) => ({ url: l.url, body: l.body }));
    const t0 = performance.now();
    let next = 0;
    const feed = async () => {
      for (let i = next++; i < requests.length; i = next++) {
        const send = () =>
          patientFetch(`${server.baseUrl}${requests[i].url}`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify(requests[i].body),
          });
        const res = await againOnClosed(send);
        if (!res.ok) throw new Error(`llama-server: HTTP ${res.status} ${await res.text()}`);
        await res.json();
      }
    };
    const ended = Promise.all(Array.from({ length: Math.max(1, plan.slots - 1) }, feed)).then(() => performance.now());
    // A feed's failure is thrown below, with the server's log, not as an unhandled rejection while the client runs.
    const over = ended.then(
      () => undefined,
      () => undefined,
    );
    const ttft = mode === "mixed" ? await interactiveClient(server.baseUrl, plan, { until: over }) : null;
    const seconds = ((await ended) - t0) / 1000;
    return { linesPerSecond: plan.lines / seconds, batchSeconds: seconds, ttft };
  } catch (err) {
    throw new Error(`llama-server ${mode}: ${(err as Error).message}; its log ends:\n${server.log().slice(-1500)}`);
  } finally {
    await server.stop();
  }
}

/** One run's figures as the log says them: the batch's time and pace, the requests' first tokens. */
function runText(r: LaneRun): string {
  const parts: string[] = [];
  if (r.linesPerSecond !== null) parts.push(`batch ${r.batchSeconds!.toFixed(2)} s (${r.linesPerSecond.toFixed(1)} lines/s)`);
  if (r.ttft) {
    const refused = r.ttft.refused ? `, ${r.ttft.refused} refused` : "";
    parts.push(`TTFT p50 ${r.ttft.p50Ms.toFixed(0)} ms, p99 ${r.ttft.p99Ms.toFixed(0)} ms over ${r.ttft.n}${refused}`);
  }
  return parts.join(" ") + (r.preemptions ? `, ${r.preemptions} batch lines gave way` : "");
}

export async function compareLanes(
  binary: string | null,
  model: { name: string; path: string },
  plan: LanesPlan,
  log: (line: string) => void,
): Promise<LanesResult> {
  log(
    `\nlanes on ${model.name}: ${plan.lines} lines x ${plan.lineTokens} tokens, with ${plan.rate} interactive request(s)/s (${plan.interactiveTokens} tokens, streamed) beside it`,
  );
  const show = (what: string, r: LaneRun) => log(`  ${what}${r.build ? ` (${r.build} build)` : ""}: ${runText(r)}`);
  const service = {
    idle: await serviceIdle(model.path, plan),
    alone: await serviceRun(model.path, plan, false),
    mixed: await serviceRun(model.path, plan, true),
  };
  for (const [k, r] of Object.entries(service)) show(`service, ${k}`, r);
  const builds = new Set(Object.values(service).map((r) => r.build));
  if (builds.size > 1)
    log(`  the service's runs did not all run one engine build (${[...builds].join(", ")}): their ratios compare builds`);
  const work = await requestsWork(model.path, plan, service).catch((err) => {
    // An estimate beside the figures measured: its failure is said, and the rest of the part kept.
    log(`  service, the requests as lines of the batch: failed (${(err as Error).message}); no estimate`);
    return undefined;
  });
  if (work)
    log(`  service, the ${work.requests} requests answered as lines of the batch: ${work.batchSeconds.toFixed(2)} s; ${workText(work)}`);
  const none: LaneRun = { linesPerSecond: null, batchSeconds: null, ttft: null };
  const peer = binary
    ? {
        idle: await peerRun(binary, model.path, plan, "idle"),
        alone: await peerRun(binary, model.path, plan, "alone"),
        mixed: await peerRun(binary, model.path, plan, "mixed"),
      }
    : { idle: none, alone: none, mixed: none };
  for (const [k, r] of Object.entries(peer)) show(`llama-server -np ${plan.slots}, ${k}`, r);
  const probe = await promptTokens(model.path, plan);
  return { model: model.name, plan, promptTokens: probe, service, work, peer };
}

/** The requests answered beside the batch, run as lines of it (LanesWork): those refused did no work there. */
async function requestsWork(modelPath: string, plan: LanesPlan, service: LanesResult["service"]): Promise<LanesWork | undefined> {
  // Past the batch's own lines the run would only take longer: a machine loaded past what it serves (four requests a
  // second at the qwen2.5-0.5b size) answered hundreds.
  const requests = Math.min(plan.lines, service.mixed.ttft?.n ?? 0);
  if (requests === 0 || service.alone.batchSeconds === null) return undefined;
  const run = await serviceRun(modelPath, plan, false, requests);
  const perRequest = (run.batchSeconds! - service.alone.batchSeconds) / requests;
  return { requests, batchSeconds: run.batchSeconds!, bound: 1 - plan.rate * perRequest };
}

/** The interactive prompts' length in the model's tokens, as the service counts them. */
async function promptTokens(modelPath: string, plan: LanesPlan): Promise<number> {
  const server = await startServer(modelPath);
  try {
    const res = await fetch(`${server.baseUrl}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", prompt: interactivePrompt(1, plan.promptSentences), max_tokens: 1 }),
    });
    return ((await res.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens;
  } finally {
    await server.stop();
  }
}
