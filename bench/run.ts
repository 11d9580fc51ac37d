// Runs every comparison of docs/performance.md in one go (npm run bench [-- --quick] [-- --only <parts>]),
// prints one table, writes bench/results/*.json and the chart (docs/bench-throughput.svg for a full run; a quick
// run keeps its chart in bench/results/).
// Not part of `npm test`: it takes minutes and its numbers depend on the machine.
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { ensureGeneratedModel } from "../engine/generated-model.js";
import { llamaServerBinary } from "../testkit/llama-server.js";
import { POSTGRES_BIN } from "../testkit/postgres.js";
import { repoRoot } from "../testkit/repo-root.js";
import { throughputChart } from "./chart.js";
import { compareDatasets } from "./datasets.js";
import { measureDistributed } from "./distributed.js";
import { measureEmbeddings, measurePrefixReuse } from "./engine-extras.js";
import { compareLanes } from "./lanes.js";
import { comparePeer, rerankWorkload } from "./peer.js";
import { extrasModel, type ModelPlan, makePlan } from "./plan.js";
import { cpuModel } from "./proc-stats.js";
import { type BenchResults, formatTable, targetsOf } from "./report.js";
import { measureScale } from "./scale.js";
import { compareScheduling, schedulingTable } from "./scheduling.js";
import { measureThroughput } from "./throughput.js";
import { compareUpstream } from "./upstream.js";

const PARTS = [
  "peer",
  "scheduling",
  "upstream",
  "throughput",
  "scale",
  "prefix",
  "embeddings",
  "distributed",
  "datasets",
  "lanes",
] as const;

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    only: { type: "string", default: PARTS.join(",") },
    stories: { type: "string", default: path.resolve(repoRoot, "../shared/models/stories260K.gguf") },
    /** Only the models whose name contains this (e.g. --model stories). */
    model: { type: "string", default: "" },
    /** The scheduling workloads at this many lines (one llama-server configuration, no ablations). */
    lines: { type: "string" },
    /** Only the scheduling and peer workloads whose name contains one of these (comma-separated), e.g. families,uniform. */
    workloads: { type: "string", default: "" },
    /** llama-server's --parallel values swept in the scheduling part (comma-separated), e.g. 8,16,32. */
    slots: { type: "string", default: "" },
    /** The scheduling part's runs with one part switched off (order, copies); --ablations false skips them. */
    ablations: { type: "string", default: "true" },
    /** How many times the scheduling part feeds llama-server directly and through the service in turn. */
    "front-pairs": { type: "string", default: "1" },
    /** llama-server's slots in the in-front pairs, where not the sweep's best (which is then fed directly beside them). */
    "front-slots": { type: "string" },
    /** The datasets part: rows timed against JSONL, and the row counts whose peak memory is compared. */
    "dataset-rows": { type: "string" },
    "dataset-memory-rows": { type: "string" },
    "dataset-pairs": { type: "string" },
    /** The lanes part: llama-server's slots beside the service, and interactive requests a second. */
    "lanes-slots": { type: "string", default: "16" },
    "lanes-rate": { type: "string", default: "1" },
  },
});
const parts = new Set(values.only.split(",").map((s) => s.trim()));
/** A whole-number option of at least 1, or undefined where it was not given. */
function wholeOption(name: "front-pairs" | "front-slots"): number | undefined {
  const given = values[name];
  if (given === undefined) return undefined;
  const n = Number(given);
  if (Number.isInteger(n) && n >= 1) return n;
  console.error(`--${name} must be a whole number of at least 1, not ${JSON.stringify(given)}`);
  process.exit(2);
}
const frontPairs = wholeOption("front-pairs") ?? 1;
const frontSlots = wholeOption("front-slots");
const log = (line: string) => console.log(line);
const started = performance.now();

const storiesPath = existsSync(values.stories) ? values.stories : null;
const plan = makePlan(values.quick, storiesPath, values.lines ? Number(values.lines) : undefined);
if (values.model) {
  plan.models = plan.models.filter((m) => m.name.includes(values.model));
  plan.peer = plan.peer.filter((p) => p.model.name.includes(values.model));
  plan.upstream = plan.upstream.filter((u) => u.model.name.includes(values.model));
  plan.scheduling = plan.scheduling.filter((s) => s.model.name.includes(values.model));
}
if (values.workloads) {
  const wanted = values.workloads.split(",").map((w) => w.trim());
  for (const s of plan.scheduling) s.cases = s.cases.filter((c) => wanted.some((w) => c.workload.name.includes(w)));
  for (const p of plan.peer) p.workloads = p.workloads.filter((pw) => wanted.some((w) => pw.name.includes(w)));
}
for (const s of plan.scheduling) {
  if (values.slots) s.grid = { ...s.grid, parallel: values.slots.split(",").map(Number) };
  if (values.ablations === "false") s.ablations = false;
}
const notes: string[] = [];
if (!storiesPath) notes.push(`${values.stories} is absent: stories260K was skipped; the generated models stand in.`);

async function modelPath(m: ModelPlan): Promise<string> {
  return "path" in m.source ? m.source.path : ensureGeneratedModel({ preset: m.source.preset });
}

const pkg = JSON.parse(await readFile(path.join(repoRoot, "node_modules/node-llama-cpp/package.json"), "utf8")) as { version: string };
const machine = {
  cpus: os.availableParallelism(),
  cpuModel: cpuModel(),
  memoryGiB: Math.round(os.totalmem() / 2 ** 30),
  node: process.version,
  nodeLlamaCpp: pkg.version,
  loadAverageAtStart: os.loadavg().map((v) => +v.toFixed(2)),
};
log(
  `bench${values.quick ? " --quick" : ""}: ${machine.cpus} CPUs (${machine.cpuModel}), ${machine.memoryGiB} GiB, Node ${machine.node}, node-llama-cpp ${machine.nodeLlamaCpp}, load ${machine.loadAverageAtStart.join(" ")}`,
);

const results: Omit<BenchResults, "targets"> = {
  startedAt: new Date().toISOString(),
  quick: values.quick,
  machine,
  peer: [],
  scheduling: [],
  upstream: [],
  throughput: [],
  scale: null,
  distributed: null,
  prefix: null,
  embeddings: null,
  datasets: null,
  lanes: null,
  gpu: { backendLog: null, ready: null, note: "" },
  notes,
};

if (parts.has("peer")) {
  const binary = llamaServerBinary(log);
  if (!binary) notes.push("llama-server could not be built here (cmake, g++ and git are needed): the peer comparison was skipped.");
  else
    for (const p of plan.peer)
      for (const w of p.workloads)
        results.peer.push(await comparePeer(binary, p.model.name, await modelPath(p.model), w, p.grid, log, values.quick ? 1 : 2));
  // Rerank lines need a reranker: the generated one, on both sides.
  if (binary && plan.rerank && (!values.workloads || values.workloads.includes("rerank"))) {
    const reranker = await ensureGeneratedModel({ preset: "reranker" });
    const grid = { parallel: plan.rerank.parallel, threads: [1, 2] };
    results.peer.push(
      await comparePeer(binary, "reranker (generated)", reranker, rerankWorkload(plan.rerank.lines), grid, log, values.quick ? 1 : 2),
    );
  }
}

if (parts.has("scheduling")) {
  const binary = llamaServerBinary(log);
  if (!binary) notes.push("llama-server could not be built here: the scheduling comparison was skipped.");
  else
    for (const s of plan.scheduling)
      for (const c of s.cases)
        results.scheduling.push(
          await compareScheduling(binary, s.model.name, await modelPath(s.model), c, s.grid, log, s.ablations, {
            pairs: frontPairs,
            slots: frontSlots,
          }),
        );
}

if (parts.has("upstream")) {
  const binary = llamaServerBinary(log);
  if (!binary) notes.push("llama-server could not be built here: the upstream comparison was skipped.");
  else
    for (const u of plan.upstream)
      results.upstream.push(
        await compareUpstream(binary, u.model.name, await modelPath(u.model), { ...u, repeats: values.quick ? 1 : 3 }, log),
      );
}

if (parts.has("throughput")) {
  for (const m of plan.models) {
    log(`\n${m.name}: ${m.requests} requests x ${m.tokens} tokens`);
    results.throughput.push(await measureThroughput(m, await modelPath(m), log));
  }
  const first = results.throughput[0];
  if (first) {
    results.gpu = {
      backendLog: first.backendLog,
      ready: { gpu: first.serverEngine.gpu, gpuLayers: first.serverEngine.gpuLayers },
      note:
        first.serverEngine.gpu === false
          ? 'No GPU here: with gpu "auto" the server logged the CPU backend and /ready shows gpu: false, 0 layers offloaded.'
          : `GPU in use: ${String(first.serverEngine.gpu)}, ${String(first.serverEngine.gpuLayers)} layers offloaded.`,
    };
    for (const t of results.throughput) {
      for (const p of t.probes) {
        const same = t.handTuned.find((h) => h.sequences === p.sequences && h.extra?.batching === p.extra?.batching);
        if (!same) continue;
        const ratio = p.tokensPerSecond / same.tokensPerSecond;
        const compared = ratio >= 1 ? `${ratio.toFixed(2)}x faster` : `${(1 / ratio).toFixed(1)}x slower`;
        notes.push(
          `${t.model}: threads ${p.threads} ran at ${p.tokensPerSecond.toFixed(0)} tokens/s against ${same.tokensPerSecond.toFixed(0)} at threads 1 (${same.label}): ${compared}.`,
        );
      }
      if (t.requests !== 256) notes.push(`${t.model}: ${t.requests} requests instead of 256, to keep the run short on this machine.`);
    }
  }
}

const realistic = extrasModel(plan.models)!;
if (parts.has("prefix")) {
  log(`\nshared-prefix reuse on ${realistic.name}`);
  const p = await measurePrefixReuse(realistic.name, await modelPath(realistic), plan.prefixRequests, plan.prefixTokens);
  results.prefix = { ...p, model: realistic.name };
  log(
    `  reuse on ${p.on.seconds.toFixed(2)} s (${p.cachedTokensOn} cached) vs off ${p.off.seconds.toFixed(2)} s: ${p.speedup.toFixed(2)}x`,
  );
}
if (parts.has("embeddings")) {
  log(`\nembeddings on ${realistic.name}`);
  const e = await measureEmbeddings(realistic.name, await modelPath(realistic), plan.embedInputs);
  results.embeddings = { ...e, model: realistic.name };
  log(`  1 context ${e.runs[0].seconds.toFixed(2)} s, 2 contexts ${e.runs[1].seconds.toFixed(2)} s`);
}
if (parts.has("scale")) {
  const m = plan.models[0];
  log(`\nscale: ${plan.scaleLines} lines on ${m.name}`);
  results.scale = await measureScale(await modelPath(m), plan.scaleLines, plan.overheadRequests, log);
}

if (parts.has("distributed")) {
  log("\ndistributed mode (PostgreSQL + S3, an upstream that answers at once)");
  if (!POSTGRES_BIN) notes.push("PostgreSQL is not installed here: the distributed-mode part was skipped.");
  else results.distributed = await measureDistributed(plan.distributed, log);
}

if (parts.has("datasets")) {
  const m = storiesPath ? { name: "stories260K", path: storiesPath } : { name: "generated tiny", path: await ensureGeneratedModel() };
  const rows = Number(values["dataset-rows"] ?? (values.quick ? 10_000 : 100_000));
  const memoryRows = (values["dataset-memory-rows"] ?? (values.quick ? "1000,10000" : "10000,100000,1000000")).split(",").map(Number);
  const pairs = Number(values["dataset-pairs"] ?? (values.quick ? 1 : 3));
  results.datasets = await compareDatasets(m, { rows, pairs, memoryRows }, log);
}

if (parts.has("lanes")) {
  const m = storiesPath ? { name: "stories260K", path: storiesPath } : { name: "generated tiny", path: await ensureGeneratedModel() };
  const binary = llamaServerBinary(log);
  if (!binary) notes.push("llama-server could not be built here: the lanes part ran the service only.");
  results.lanes = await compareLanes(
    binary,
    m,
    {
      lines: values.quick ? 128 : 512,
      lineTokens: 128,
      rate: Number(values["lanes-rate"]),
      interactiveTokens: 64,
      idleRequests: values.quick ? 10 : 30,
      slots: Number(values["lanes-slots"]),
      threads: 1,
    },
    log,
  );
}

results.machine.loadAverageAtEnd = os.loadavg().map((v) => +v.toFixed(2));
const final: BenchResults = { ...results, targets: targetsOf(results), totalSeconds: (performance.now() - started) / 1000 };
log(`\n${formatTable(final)}\n`);
if (final.scheduling.length > 0) log(`${schedulingTable(final.scheduling)}\n`);

const outDir = path.join(repoRoot, "bench/results");
await mkdir(outDir, { recursive: true });
const stamp = final.startedAt.replace(/[:.]/g, "-");
const json = JSON.stringify(final, null, 2);
await writeFile(path.join(outDir, `bench-${stamp}${values.quick ? "-quick" : ""}.json`), json);
await writeFile(path.join(outDir, values.quick ? "latest-quick.json" : "latest.json"), json);
if (final.throughput.length > 0) {
  const caption = `${machine.cpus} CPUs (${machine.cpuModel}), node-llama-cpp ${machine.nodeLlamaCpp}, ${final.startedAt.slice(0, 10)}; npm run bench${values.quick ? " -- --quick" : ""}`;
  const chart = values.quick ? path.join(outDir, "bench-throughput-quick.svg") : path.join(repoRoot, "docs/bench-throughput.svg");
  await mkdir(path.dirname(chart), { recursive: true });
  await writeFile(chart, throughputChart(final.throughput, caption));
  log(`chart: ${path.relative(repoRoot, chart)}`);
}
log(`results: bench/results/${values.quick ? "latest-quick.json" : "latest.json"} (${final.totalSeconds!.toFixed(0)} s in all)`);
