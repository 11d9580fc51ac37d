// Runs every comparison of docs/performance.md in one go (npm run bench [-- --quick] [-- --only <parts>]),
// prints one table, writes bench/results/*.json and the chart (docs/bench-throughput.svg for a full run; a quick
// run keeps its chart in bench/results/).
// Not part of `npm test`: it takes minutes and its numbers depend on the machine.
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { ensureGeneratedModel } from "../engine/load/generated-model.js";
import { llamaServerBinary } from "../testkit/llama-server.js";
import { POSTGRES_BIN } from "../testkit/postgres.js";
import { repoRoot } from "../testkit/repo-root.js";
import { compareAdapters } from "./adapters.js";
import { BenchUsageError, benchArgs, type Part, USAGE } from "./args.js";
import { measureCache } from "./cache.js";
import { batchedBenchBinary } from "./ceiling.js";
import { throughputChart } from "./chart.js";
import { compareDatasets } from "./datasets.js";
import { measureDistributed } from "./distributed.js";
import { measureEmbeddings, measurePrefixReuse } from "./engine-extras.js";
import { compareLanes } from "./lanes.js";
import { comparePeer, rerankWorkload } from "./peer.js";
import { extrasModel, type ModelPlan, makePlan, narrowPlan } from "./plan.js";
import { cpuModel } from "./proc-stats.js";
import { type BenchResults, formatTable, targetsOf } from "./report.js";
import { measureScale } from "./scale.js";
import { compareScheduling, schedulingTable } from "./scheduling.js";
import { measureThroughput } from "./throughput.js";
import { compareUpstream } from "./upstream.js";

/** What `read` gives, or the one line of a mistake on the command line, and exit code 2. */
function usage<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (!(err instanceof BenchUsageError)) throw err;
    console.error(`npm run bench: ${err.message}`);
    process.exit(2);
  }
}
const values = usage(() => benchArgs(process.argv.slice(2)));
if (values === "help") {
  console.log(USAGE);
  process.exit(0);
}
const parts = values.parts;
/** Seconds each part took, in the order they ran: printed with the table and kept in the results. */
const partSeconds: Partial<Record<Part, number>> = {};
async function part(name: Part, run: () => Promise<void>): Promise<void> {
  if (!parts.has(name)) return;
  const t0 = performance.now();
  await run();
  partSeconds[name] = Math.round((performance.now() - t0) / 1000);
}
const log = (line: string) => console.log(line);
const started = performance.now();

const storiesFile = values.stories ?? path.resolve(repoRoot, "../shared/models/stories260K.gguf");
const storiesPath = existsSync(storiesFile) ? storiesFile : null;
if (values.stories && !storiesPath) {
  console.error(`npm run bench: --stories ${values.stories} is not a file`);
  process.exit(2);
}
const plan = usage(() => narrowPlan(makePlan(values.quick, storiesPath, values.lines), values));
const notes: string[] = [];
if (!storiesPath) notes.push(`${storiesFile} is absent: stories260K was skipped; the generated models stand in.`);

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
  cache: null,
  adapters: null,
  gpu: { backendLog: null, ready: null, note: "" },
  notes,
};

await part("peer", async () => {
  const binary = llamaServerBinary(log);
  if (!binary) notes.push("llama-server could not be built here (cmake, g++ and git are needed): the peer comparison was skipped.");
  else
    for (const p of plan.peer)
      for (const w of p.workloads)
        results.peer.push(await comparePeer(binary, p.model.name, await modelPath(p.model), w, p.grid, log, values.quick ? 1 : 2));
  // Rerank lines need a reranker: the generated one, on both sides.
  if (binary && plan.rerank && (values.workloads.length === 0 || values.workloads.some((w) => "rerank".includes(w)))) {
    const reranker = await ensureGeneratedModel({ preset: "reranker" });
    const grid = { parallel: plan.rerank.parallel, threads: [1, 2] };
    results.peer.push(
      await comparePeer(binary, "reranker (generated)", reranker, rerankWorkload(plan.rerank.lines), grid, log, values.quick ? 1 : 2),
    );
  }
});

await part("scheduling", async () => {
  const binary = llamaServerBinary(log);
  if (!binary) notes.push("llama-server could not be built here: the scheduling comparison was skipped.");
  else {
    const families = plan.scheduling.some((s) => s.cases.some((c) => c.workload.name.startsWith("families")));
    const batchedBench = families ? batchedBenchBinary(log) : null;
    if (families && batchedBench === null) notes.push("llama-batched-bench could not be built here: the families rows have no ceiling.");
    for (const s of plan.scheduling)
      for (const c of s.cases)
        results.scheduling.push(
          await compareScheduling(
            binary,
            s.model.name,
            await modelPath(s.model),
            c,
            s.grid,
            log,
            s.ablations,
            { pairs: values.frontPairs, slots: values.frontSlots },
            batchedBench,
          ),
        );
  }
});

await part("upstream", async () => {
  const binary = llamaServerBinary(log);
  if (!binary) notes.push("llama-server could not be built here: the upstream comparison was skipped.");
  else
    for (const u of plan.upstream)
      results.upstream.push(
        await compareUpstream(binary, u.model.name, await modelPath(u.model), { ...u, repeats: values.quick ? 1 : 3 }, log),
      );
});

await part("throughput", async () => {
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
});

const realistic = extrasModel(plan.models)!;
await part("prefix", async () => {
  log(`\nshared-prefix reuse on ${realistic.name}`);
  const p = await measurePrefixReuse(realistic.name, await modelPath(realistic), plan.prefixRequests, plan.prefixTokens);
  results.prefix = { ...p, model: realistic.name };
  log(
    `  reuse on ${p.on.seconds.toFixed(2)} s (${p.cachedTokensOn} cached) vs off ${p.off.seconds.toFixed(2)} s: ${p.speedup.toFixed(2)}x`,
  );
});
await part("embeddings", async () => {
  log(`\nembeddings on ${realistic.name}`);
  const e = await measureEmbeddings(realistic.name, await modelPath(realistic), plan.embedInputs);
  results.embeddings = { ...e, model: realistic.name };
  log(`  1 context ${e.runs[0].seconds.toFixed(2)} s, 2 contexts ${e.runs[1].seconds.toFixed(2)} s`);
});
await part("scale", async () => {
  const m = plan.models[0];
  log(`\nscale: ${plan.scaleLines} lines on ${m.name}`);
  results.scale = await measureScale(await modelPath(m), plan.scaleLines, plan.overheadRequests, log);
});

await part("distributed", async () => {
  log("\ndistributed mode (PostgreSQL + S3, an upstream that answers at once)");
  if (!POSTGRES_BIN) notes.push("PostgreSQL is not installed here: the distributed-mode part was skipped.");
  else results.distributed = await measureDistributed(plan.distributed, log);
});

await part("datasets", async () => {
  const m = storiesPath ? { name: "stories260K", path: storiesPath } : { name: "generated tiny", path: await ensureGeneratedModel() };
  const rows = values.datasetRows ?? (values.quick ? 10_000 : 100_000);
  const memoryRows = values.datasetMemoryRows ?? (values.quick ? [1000, 10000] : [10000, 100000, 1000000]);
  const pairs = values.datasetPairs ?? (values.quick ? 1 : 3);
  results.datasets = await compareDatasets(m, { rows, pairs, memoryRows }, log);
});

await part("lanes", async () => {
  const stories = values.lanesModel === "stories" && storiesPath;
  if (values.lanesModel === "stories" && !storiesPath) notes.push("stories260K is not in ../shared/models: the lanes part ran on small.");
  const preset = values.lanesModel === "stories" ? "small" : values.lanesModel;
  const m = stories
    ? { name: "stories260K", path: storiesPath }
    : { name: `${preset} (generated)`, path: await ensureGeneratedModel({ preset }) };
  const binary = llamaServerBinary(log);
  if (!binary) notes.push("llama-server could not be built here: the lanes part ran the service only.");
  results.lanes = await compareLanes(
    binary,
    m,
    {
      lines: values.quick ? 128 : 512,
      lineTokens: 128,
      rate: values.lanesRate,
      interactiveTokens: 64,
      // About 200 prompt tokens either way: stories260K's tokens are about two characters, a generated model's one.
      promptSentences: stories ? 6 : 2,
      idleRequests: values.quick ? 10 : 30,
      slots: values.lanesSlots,
      threads: 1,
    },
    log,
  );
});

await part("cache", async () => {
  const m = { name: "small (generated, 8x512, Q8_0)", path: await ensureGeneratedModel({ preset: "small" }) };
  const q = values.quick;
  results.cache = await measureCache(
    m,
    {
      lines: values.cacheLines ?? (q ? 500 : 2000),
      repeatShare: 0.4,
      maxTokens: 16,
      jobMaxTokens: 4,
      rounds: values.cacheRounds ?? (q ? 1 : 2),
      rows: values.cacheRows ?? (q ? 2000 : 10_000),
      changedShare: 0.02,
      storeCounts: values.cacheEntries ?? (q ? [10_000, 100_000] : [10_000, 1_000_000]),
      lookups: values.cacheLookups ?? (q ? 5000 : 20_000),
      pgEntries: Math.min(10_000, values.cacheEntries?.[0] ?? 10_000),
    },
    log,
  );
  if (!results.cache.store.lookups.some((l) => l.store === "postgres")) notes.push(results.cache.store.note ?? "");
});

await part("adapters", async () => {
  const m = values.quick
    ? { name: "generated tiny", path: await ensureGeneratedModel() }
    : { name: "generated small", path: await ensureGeneratedModel({ preset: "small" }) };
  results.adapters = await compareAdapters(m, { lines: values.quick ? 128 : 512, maxTokens: 32, runs: values.quick ? 1 : 2 }, log);
});

results.machine.loadAverageAtEnd = os.loadavg().map((v) => +v.toFixed(2));
const final: BenchResults = {
  ...results,
  targets: targetsOf(results),
  totalSeconds: (performance.now() - started) / 1000,
  partSeconds,
};
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
