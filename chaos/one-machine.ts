// The one-machine campaign: the embedded service (no other process) with BATCH_DIR on an ext4 file system of its
// own, a loop device mounted in a private mount namespace, so the nemesis can fill it, make it fail every write
// (read-only) and cut its power (EXT4_IOC_SHUTDOWN, then fsck) as well as kill -9 and SIGSTOP the process. Needs root
// and e2fsprogs: `available()` says why not where they are missing.
import { execFileSync, spawnSync } from "node:child_process";
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { syncDir } from "../stores/durable.js";
import { entryShell } from "../testkit/entry.js";
import { batchLines, follow, judge, submit } from "./client.js";
import type { CampaignOptions } from "./distributed.js";
import { describeSchedule, type Fault, type FaultMenu, planFaults, runFaults, type ScheduleResult, scheduleResult } from "./nemesis.js";
import { alive, requestsRun, type ServiceProcess, startSupervised } from "./process.js";

/**
 * EXT4_IOC_SHUTDOWN (_IOR('X', 125, __u32)): with EXT4_GOING_FLAGS_NOLOGFLUSH (2) nothing more reaches the disk (a
 * power cut); with EXT4_GOING_FLAGS_DEFAULT (0) what is written is flushed first, then every write fails (a disk
 * that goes read-only under the process, as ext4 does on an error).
 */
const GODOWN = `import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.ioctl(fd, 0x8004587D, struct.pack("I", int(sys.argv[2])))`;

/** Undefined when an ext4 image can be loop-mounted in a mount namespace here; else why not. */
export function available(): string | undefined {
  const work = mkdtempSync(path.join(os.tmpdir(), "obi-chaos-probe-"));
  try {
    const img = path.join(work, "probe.ext4");
    mkdirSync(path.join(work, "mnt"));
    execFileSync("truncate", ["-s", "16M", img]);
    execFileSync("mkfs.ext4", ["-q", "-F", img], { stdio: "ignore" });
    const r = spawnSync("unshare", ["-m", "sh", "-c", `mount -o loop "${img}" "${work}/mnt"`], { encoding: "utf8" });
    return r.status === 0 ? undefined : `cannot loop-mount ext4 in a mount namespace (${r.stderr.trim()}): run as root`;
  } catch (err) {
    return `no ext4 tools (${(err as Error).message})`;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

export async function oneMachineCampaign(o: CampaignOptions): Promise<ScheduleResult[]> {
  const work = mkdtempSync(path.join(os.tmpdir(), "obi-chaos-one-"));
  const image = path.join(work, "disk.ext4");
  const dir = path.join(work, "mnt");
  const godown = path.join(work, "godown.py");
  mkdirSync(dir);
  writeFileSync(godown, GODOWN);
  execFileSync("truncate", ["-s", "160M", image]);
  execFileSync("mkfs.ext4", ["-q", "-F", image], { stdio: "ignore" });
  let proc: ServiceProcess | undefined;
  let banked = 0;
  let seen = 0;
  const inside = (...p: string[]) => path.join(`/proc/${proc!.child.pid}/root`, dir, ...p);
  const start = async () => {
    banked += seen;
    seen = 0;
    proc = await startSupervised(
      { BATCH_DIR: dir, MODEL_PATH: o.modelPath, THREADS: "1", SEQUENCES: "2", CONTEXT_SIZE: "512" },
      {
        command: "unshare",
        args: ["-m", "sh", "-c", `mount -o loop "${image}" "${dir}" && exec ${entryShell("app/main.ts", ["--expose-gc"])}`],
      },
    );
  };
  /** Kills the process (its namespace and mount go with it), checks the file system, starts it again. */
  const restart = async () => {
    proc!.child.kill("SIGCONT");
    proc!.child.kill("SIGKILL");
    await proc!.exited;
    await new Promise((r) => setTimeout(r, 500));
    spawnSync("e2fsck", ["-fy", image], { stdio: "ignore" });
    await start();
  };
  const scrape = async () => {
    const p = proc;
    if (!alive(p)) return;
    const n = await requestsRun(p.baseUrl);
    // A reading of an incarnation that has since been replaced is not this one's.
    if (n !== undefined && proc === p) seen = n;
  };
  const scraper = setInterval(() => void scrape(), 500);
  const bases = () => (alive(proc) ? [proc.baseUrl] : []);
  const results: ScheduleResult[] = [];
  try {
    await start();
    for (let i = 0; i < o.schedules; i++) results.push(await schedule(o.seed + i));
  } finally {
    clearInterval(scraper);
    proc?.child.kill("SIGCONT");
    proc?.child.kill("SIGKILL");
    await proc?.exited;
    rmSync(work, { recursive: true, force: true });
  }
  return results;

  async function schedule(seed: number): Promise<ScheduleResult> {
    const began = Date.now();
    await scrape();
    const ranBefore = banked + seen;
    // Long enough (about 15 s of work) that the faults land while the batches run.
    const batches = [batchLines(400 + (seed % 5) * 40, `m${seed}a`, 40), batchLines(200 + (seed % 3) * 40, `m${seed}b`, 40)];
    const ids = [];
    for (const b of batches) ids.push(await submit(bases, b.text));
    // Each batch's output read while it runs, through the faults.
    const followers = ids.map((id) => follow(bases, id));
    const menu: FaultMenu[] = [
      { kind: "kill-9", targets: ["server"] },
      { kind: "sigstop", targets: ["server"] },
      { kind: "disk-full", targets: ["server"] },
      { kind: "read-only", targets: ["server"] },
      { kind: "power-cut", targets: ["server"] },
    ];
    // One at a time: every fault here is to the one process or its one disk.
    const faults = planFaults(seed, menu, 2, 8_000, 6_000);
    const problems = await runFaults(faults, inject, { oneAtATime: true });
    const verdicts = [];
    for (const [k, id] of ids.entries()) verdicts.push(await judge(bases, id, batches[k].ids, 240_000, followers[k]));
    await new Promise((r) => setTimeout(r, 600));
    await scrape();
    const lines = batches.reduce((n, b) => n + b.ids.length, 0);
    const result = scheduleResult({ mode: "one machine", seed, faults, lines, verdicts, problems, ran: banked + seen - ranBefore, began });
    o.log(describeSchedule(result));
    return result;
  }

  async function inject(f: Fault): Promise<() => Promise<void>> {
    switch (f.kind) {
      case "kill-9":
        proc!.child.kill("SIGKILL");
        await proc!.exited;
        return () => restart();
      case "sigstop":
        proc!.child.kill("SIGSTOP");
        return async () => void proc!.child.kill("SIGCONT");
      case "disk-full": {
        const filler = inside("filler");
        for (const size of [1 << 20, 1 << 16, 1 << 12, 1 << 8])
          try {
            for (;;) appendFileSync(filler, Buffer.alloc(size));
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
          }
        // The space comes back for good: an unlink not yet in ext4's journal (committed every 5 s) is undone by a
        // power cut right after it, and the next schedule would start on a full disk.
        return async () => {
          rmSync(filler, { force: true });
          await syncDir(inside());
        };
      }
      // A remount read-only is refused while the batch's result files are open for writing ("busy"): the disk
      // fails under the process instead, then is checked and mounted again, as after ext4 remounts on an error.
      case "read-only":
        execFileSync("python3", [godown, inside(), "0"]);
        return () => restart();
      case "power-cut":
        execFileSync("python3", [godown, inside(), "2"]);
        return () => restart();
      default:
        throw new Error(`unknown fault ${f.kind}`);
    }
  }
}
