// The nemesis: a seeded schedule of faults over a window, each with a start and a duration, and the bookkeeping of
// a schedule's outcome. What a fault does is the campaign's (distributed.ts, one-machine.ts); the schedule only
// says which, to whom, when and for how long, so the same seed replays the same history of faults.
import { rng } from "../testkit/fuzz.js";
import { describeVerdict, type Verdict } from "./checker.js";

export interface Fault {
  kind: string;
  target: string;
  /** From the schedule's start. */
  atMs: number;
  forMs: number;
}

export interface FaultMenu {
  kind: string;
  targets: string[];
}

/** `count` faults drawn from `menu`, each starting within `windowMs` and lasting 2 to `maxMs`. */
export function planFaults(seed: number, menu: FaultMenu[], count: number, windowMs: number, maxMs = 8_000): Fault[] {
  const rand = rng(seed);
  const faults: Fault[] = [];
  for (let i = 0; i < count; i++) {
    const m = menu[Math.floor(rand() * menu.length)];
    faults.push({
      kind: m.kind,
      target: m.targets[Math.floor(rand() * m.targets.length)],
      atMs: Math.floor(rand() * windowMs),
      forMs: 2_000 + Math.floor(rand() * (maxMs - 2_000)),
    });
  }
  return faults.sort((a, b) => a.atMs - b.atMs);
}

export const describeFault = (f: Fault) => `${f.kind} ${f.target} ${(f.forMs / 1000).toFixed(1)}s@${(f.atMs / 1000).toFixed(1)}`;

/**
 * Runs each fault at its time: `inject` starts it and returns how to end it (awaited after its duration). Two
 * faults of one kind on one target never overlap (a second kill of a process being restarted would start it
 * twice, a second stop of a stopped PostgreSQL fails): the later waits for the earlier to end. Faults of different
 * kinds on one target do overlap (a partition, then a kill). With `oneAtATime`, every fault waits for the one
 * before it.
 */
export async function runFaults(
  faults: Fault[],
  inject: (f: Fault) => Promise<() => Promise<void>>,
  opts: { oneAtATime?: boolean } = {},
): Promise<string[]> {
  const start = Date.now();
  const problems: string[] = [];
  const busy = new Map<string, Promise<void>>();
  const one = async (f: Fault) => {
    await new Promise((r) => setTimeout(r, Math.max(0, start + f.atMs - Date.now())));
    try {
      const heal = await inject(f);
      await new Promise((r) => setTimeout(r, f.forMs));
      await heal();
    } catch (err) {
      problems.push(`${describeFault(f)}: ${(err as Error).message}`);
    }
  };
  if (opts.oneAtATime) for (const f of faults) await one(f);
  else
    await Promise.all(
      faults.map((f) => {
        const key = `${f.kind} ${f.target}`;
        const done = (busy.get(key) ?? Promise.resolve()).then(() => one(f));
        busy.set(key, done);
        return done;
      }),
    );
  return problems;
}

/** One schedule's line in the campaign's table. */
export interface ScheduleResult {
  mode: "distributed" | "one machine";
  seed: number;
  faults: string[];
  batches: number;
  lines: number;
  lost: number;
  duplicated: number;
  mismatches: string[];
  /** Requests run more than once (results beyond the lines), as far as the processes' metrics saw. */
  recomputed: number;
  /** Results the processes' metrics counted in all (the lines, plus what was recomputed). */
  ran: number;
  /** Output lines its readers got while the batches ran (each matched against the output file by the checker). */
  readEarly: number;
  seconds: number;
}

/** A schedule's outcome from its faults, its batches' verdicts and the results its processes were seen to run. */
export function scheduleResult(a: {
  mode: ScheduleResult["mode"];
  seed: number;
  faults: Fault[];
  lines: number;
  verdicts: Verdict[];
  problems: string[];
  ran: number;
  began: number;
}): ScheduleResult {
  return {
    mode: a.mode,
    seed: a.seed,
    faults: a.faults.map(describeFault),
    batches: a.verdicts.length,
    lines: a.lines,
    lost: a.verdicts.reduce((n, v) => n + v.lost, 0),
    duplicated: a.verdicts.reduce((n, v) => n + v.duplicated, 0),
    mismatches: [...a.problems, ...a.verdicts.flatMap((v) => (v.mismatches.length ? [describeVerdict(v)] : []))],
    recomputed: Math.max(0, a.ran - a.lines),
    ran: a.ran,
    readEarly: a.verdicts.reduce((n, v) => n + (v.readEarly ?? 0), 0),
    seconds: Math.round((Date.now() - a.began) / 1000),
  };
}

export const describeSchedule = (r: ScheduleResult) =>
  `${r.mode} seed ${r.seed}: ${r.faults.join(", ")} -> lost ${r.lost}, duplicated ${r.duplicated}, recomputed ${r.recomputed} (results seen ${r.ran}, read while running ${r.readEarly})${r.mismatches.length ? `, ${r.mismatches.join("; ")}` : ""}`;
