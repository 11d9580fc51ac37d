// npm run chaos: seeded fault schedules over real processes, judged by the checker, printed as a table.
//   npm run chaos                                  -- 50 distributed schedules and 20 on one machine (docs/reliability.md's)
//   npm run chaos -- --distributed 3 --one-machine 2 --seed 7
// Exits 1 when any batch lost, duplicated or miscounted a line. The distributed campaign needs PostgreSQL; the
// one-machine campaign needs root (a loop-mounted ext4): each says so and is skipped where it cannot run.
import { existsSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../testkit/postgres.js";
import { repoRoot } from "../testkit/repo-root.js";
import { distributedCampaign } from "./distributed.js";
import type { ScheduleResult } from "./nemesis.js";
import { available, oneMachineCampaign } from "./one-machine.js";

const { values } = parseArgs({
  options: {
    distributed: { type: "string", default: "50" },
    "one-machine": { type: "string", default: "20" },
    seed: { type: "string", default: "1" },
  },
});

async function modelPath(): Promise<string> {
  if (process.env.MODEL_PATH) return path.resolve(process.env.MODEL_PATH);
  const shared = path.resolve(repoRoot, "../shared/models/stories260K.gguf");
  if (existsSync(shared)) return shared;
  const { ensureGeneratedModel } = await import("../engine/load/generated-model.js");
  return ensureGeneratedModel();
}

export function table(results: ScheduleResult[]): string {
  const rows = [
    "| mode | schedules | faults | batches | lines | lost | duplicated | count mismatches | recomputed lines | wall |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const mode of ["distributed", "one machine"] as const) {
    const r = results.filter((x) => x.mode === mode);
    if (r.length === 0) continue;
    const kinds = new Map<string, number>();
    for (const f of r.flatMap((x) => x.faults)) kinds.set(f.split(" ")[0], (kinds.get(f.split(" ")[0]) ?? 0) + 1);
    const sum = (k: "batches" | "lines" | "lost" | "duplicated" | "recomputed" | "seconds") => r.reduce((n, x) => n + x[k], 0);
    rows.push(
      `| ${mode} | ${r.length} | ${[...kinds].map(([k, n]) => `${k} ×${n}`).join(", ")} | ${sum("batches")} | ${sum("lines")} | ${sum("lost")} | ${sum("duplicated")} | ${r.reduce((n, x) => n + x.mismatches.length, 0)} | ${sum("recomputed")} | ${sum("seconds")} s |`,
    );
  }
  return rows.join("\n");
}

async function main() {
  const seed = Number(values.seed);
  const log = (line: string) => console.log(line);
  const model = await modelPath();
  const results: ScheduleResult[] = [];
  const nDist = Number(values.distributed);
  const nOne = Number(values["one-machine"]);
  if (nDist > 0) {
    if (!POSTGRES_BIN) console.log(`distributed campaign skipped: ${SKIP_POSTGRES_NOTE}`);
    else results.push(...(await distributedCampaign({ schedules: nDist, seed, modelPath: model, log })));
  }
  if (nOne > 0) {
    const why = available();
    if (why) console.log(`one-machine campaign skipped: ${why}`);
    else results.push(...(await oneMachineCampaign({ schedules: nOne, seed: seed + 10_000, modelPath: model, log })));
  }
  console.log(`\n${table(results)}\n`);
  const bad = results.filter((r) => r.lost + r.duplicated + r.mismatches.length > 0);
  console.log(`${results.length - bad.length} passed, ${bad.length} failed`);
  process.exit(bad.length > 0 ? 1 : 0);
}

await main();
