// The distributed campaign: a throwaway PostgreSQL and an S3 server, two API servers and two workers as real
// processes, each behind TCP proxies of its own to PostgreSQL and to S3. Every schedule submits batches, lets the
// nemesis loose (kill -9 and restart, SIGSTOP/SIGCONT, silent or refusing partitions from either store, a
// checkpoint commit whose reply is lost, a PostgreSQL restart), heals everything, and judges every batch.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { type SharedState, startSharedState } from "../testkit/shared-state.js";
import { batchLines, follow, judge, submit } from "./client.js";
import { describeSchedule, type Fault, type FaultMenu, planFaults, runFaults, type ScheduleResult, scheduleResult } from "./nemesis.js";
import { alive, requestsRun, type ServiceProcess, startSupervised } from "./process.js";
import { startTcpProxy, type TcpProxy, throughProxy } from "./tcp-proxy.js";

const SETTINGS = { SHARD_SIZE: "40", CHECKPOINT_SECONDS: "1", LEASE_SECONDS: "4", THREADS: "1", SEQUENCES: "2", CONTEXT_SIZE: "512" };
/** Text only the checkpoint commit's statement sends (postgres/shards.ts). */
const COMMIT_SQL = "checkpoints = checkpoints + 1";

interface Slot {
  name: string;
  role: "api" | "worker";
  dir: string;
  pg: TcpProxy;
  s3: TcpProxy;
  proc?: ServiceProcess;
  /** Requests its earlier incarnations ran, and what this one has run as last read. */
  banked: number;
  seen: number;
}

export interface CampaignOptions {
  schedules: number;
  seed: number;
  modelPath: string;
  log: (line: string) => void;
}

export async function distributedCampaign(o: CampaignOptions): Promise<ScheduleResult[]> {
  const shared = await startSharedState();
  const s3Port = Number(new URL(shared.env.S3_ENDPOINT).port);
  const slots: Slot[] = [];
  for (const [name, role] of [
    ["api-0", "api"],
    ["api-1", "api"],
    ["worker-0", "worker"],
    ["worker-1", "worker"],
  ] as const) {
    slots.push({
      name,
      role,
      dir: mkdtempSync(path.join(os.tmpdir(), `obi-chaos-${name}-`)),
      pg: await startTcpProxy({ host: "127.0.0.1", port: shared.pg.port }),
      s3: await startTcpProxy({ host: "127.0.0.1", port: s3Port }),
      banked: 0,
      seen: 0,
    });
  }
  const start = async (s: Slot) => {
    s.banked += s.seen;
    s.seen = 0;
    s.proc = await startSupervised({
      ...shared.env,
      ...SETTINGS,
      DATABASE_URL: throughProxy(shared.env.DATABASE_URL, s.pg),
      S3_ENDPOINT: `http://127.0.0.1:${s.s3.port}`,
      ROLE: s.role,
      WORKER_ID: s.name,
      BATCH_DIR: s.dir,
      MODEL_PATH: o.modelPath,
    });
  };
  const scrape = async () => {
    for (const s of slots) {
      const proc = s.proc;
      if (s.role !== "worker" || !alive(proc)) continue;
      const n = await requestsRun(proc.baseUrl);
      // A reading of an incarnation that has since been replaced is not this one's.
      if (n !== undefined && s.proc === proc) s.seen = n;
    }
  };
  const ran = () => slots.reduce((sum, s) => sum + s.banked + s.seen, 0);
  const apis = () => slots.filter((s) => s.role === "api" && alive(s.proc)).map((s) => s.proc!.baseUrl);
  const scraper = setInterval(() => void scrape(), 500);
  const results: ScheduleResult[] = [];
  try {
    for (const s of slots) await start(s);
    for (let i = 0; i < o.schedules; i++) results.push(await schedule(o.seed + i));
  } finally {
    clearInterval(scraper);
    for (const s of slots) {
      s.proc?.child.kill("SIGCONT");
      s.proc?.child.kill("SIGKILL");
      await s.proc?.exited;
      await s.pg.close();
      await s.s3.close();
      rmSync(s.dir, { recursive: true, force: true });
    }
    await shared.close();
  }
  return results;

  async function schedule(seed: number): Promise<ScheduleResult> {
    const began = Date.now();
    await scrape();
    const ranBefore = ran();
    // Long enough (about 15 s of work) that the faults land while the batches run.
    const batches = [batchLines(500 + (seed % 5) * 40, `d${seed}a`, 32), batchLines(300 + (seed % 3) * 40, `d${seed}b`, 32)];
    const ids = [];
    for (const b of batches) ids.push(await submit(apis, b.text));
    // Each batch's output read while it runs, through the faults.
    const followers = ids.map((id) => follow(apis, id));
    const names = (role: string) => slots.filter((s) => s.role === role).map((s) => s.name);
    const menu: FaultMenu[] = [
      { kind: "kill-9", targets: [...names("worker"), ...names("api")] },
      { kind: "sigstop", targets: [...names("worker"), ...names("api")] },
      { kind: "partition-db-silent", targets: [...names("worker"), ...names("api")] },
      { kind: "partition-db-refuse", targets: names("worker") },
      { kind: "partition-s3", targets: [...names("worker"), ...names("api")] },
      { kind: "lost-commit-reply", targets: names("worker") },
      { kind: "postgres-restart", targets: ["postgres"] },
    ];
    const faults = planFaults(seed, menu, 3, 12_000);
    const problems = await runFaults(faults, (f) => inject(f, shared));
    const verdicts = [];
    for (const [k, id] of ids.entries()) verdicts.push(await judge(apis, id, batches[k].ids, 240_000, followers[k]));
    await new Promise((r) => setTimeout(r, 1_200));
    await scrape();
    const lines = batches.reduce((n, b) => n + b.ids.length, 0);
    const result = scheduleResult({ mode: "distributed", seed, faults, lines, verdicts, problems, ran: ran() - ranBefore, began });
    o.log(describeSchedule(result));
    return result;
  }

  async function inject(f: Fault, state: SharedState): Promise<() => Promise<void>> {
    if (f.kind === "postgres-restart") {
      state.pg.stop();
      return async () => state.pg.start();
    }
    const s = slots.find((x) => x.name === f.target)!;
    switch (f.kind) {
      case "kill-9":
        s.proc!.child.kill("SIGKILL");
        await s.proc!.exited;
        return () => start(s);
      case "sigstop":
        s.proc!.child.kill("SIGSTOP");
        return async () => void s.proc!.child.kill("SIGCONT");
      case "partition-db-silent":
      case "partition-db-refuse":
        s.pg.partition(f.kind.endsWith("refuse") ? "refuse" : "silent");
        return async () => s.pg.heal();
      case "partition-s3":
        s.s3.partition("silent");
        return async () => s.s3.heal();
      case "lost-commit-reply":
        // Armed now: the next checkpoint commit lands, its reply is lost, and the worker is cut off for the fault's length.
        void s.pg.dropReplyTo(COMMIT_SQL, f.forMs, "refuse");
        return async () => s.pg.heal();
      default:
        throw new Error(`unknown fault ${f.kind}`);
    }
  }
}
