// A short schedule of each kind of `npm run chaos` in every test run: the nemesis over real processes (PostgreSQL, an
// S3 server, two API servers and two workers behind TCP proxies; the embedded service on a loop-mounted ext4), every
// batch judged by the checker. One each, as the faults the next seeds draw (a PostgreSQL restart, S3 cut off, a full
// or read-only disk) have tests of their own (tests/distributed/process-deaths, tests/e2e/disk-faults-*). The long
// campaign (50 + 20 schedules) prints docs/reliability.md's table.
import { describe, expect, it } from "vitest";
import { distributedCampaign } from "../../chaos/distributed.js";
import { describeFault, describeSchedule, planFaults, type ScheduleResult } from "../../chaos/nemesis.js";
import { available, oneMachineCampaign } from "../../chaos/one-machine.js";
import { testModelPath } from "../../testkit/model.js";
import { POSTGRES_BIN, SKIP_POSTGRES_NOTE } from "../../testkit/postgres.js";

const SEED = Number(process.env.CHAOS_SEED ?? 101);
if (!POSTGRES_BIN) console.warn(SKIP_POSTGRES_NOTE);
const noLoop = available();
if (noLoop) console.warn(`campaigns.test: the one-machine schedules are skipped: ${noLoop}`);

/** Every schedule lost, duplicated and miscounted nothing (a failure names the seed that replays it). */
function expectClean(results: ScheduleResult[]) {
  expect(results.length).toBeGreaterThan(0);
  for (const r of results) expect(r.lost + r.duplicated + r.mismatches.length, describeSchedule(r)).toBe(0);
  // Their output was read while they ran, through the faults, and matched the output files line for line.
  expect(results.reduce((n, r) => n + r.readEarly, 0)).toBeGreaterThan(0);
}

describe("the nemesis's schedules", () => {
  it("replays the same faults for the same seed", () => {
    const menu = [
      { kind: "kill-9", targets: ["a", "b"] },
      { kind: "sigstop", targets: ["a"] },
    ];
    const one = planFaults(5, menu, 4, 10_000).map(describeFault);
    expect(planFaults(5, menu, 4, 10_000).map(describeFault)).toEqual(one);
    expect(planFaults(6, menu, 4, 10_000).map(describeFault)).not.toEqual(one);
  });
});

describe.skipIf(!POSTGRES_BIN)("chaos: distributed schedules", () => {
  it(`lose, duplicate and miscount nothing (seed ${SEED})`, async () => {
    const results = await distributedCampaign({ schedules: 1, seed: SEED, modelPath: await testModelPath(), log: console.log });
    expectClean(results);
    expect(results.flatMap((r) => r.faults)).toHaveLength(3);
  }, 600_000);
});

describe.skipIf(noLoop !== undefined)("chaos: one-machine schedules", () => {
  it(`lose, duplicate and miscount nothing (seed ${SEED + 10_000})`, async () => {
    const results = await oneMachineCampaign({ schedules: 1, seed: SEED + 10_000, modelPath: await testModelPath(), log: console.log });
    expectClean(results);
  }, 600_000);
});
