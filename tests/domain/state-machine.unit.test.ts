import { describe, expect, it } from "vitest";
import { canTransition, InvalidTransitionError, isEnding, isFinal, transition } from "../../domain/batch-state.js";
import { BATCH_STATUSES, type Batch, type BatchStatus } from "../../domain/objects.js";

const ALLOWED: Array<[BatchStatus, BatchStatus]> = [
  ["validating", "in_progress"],
  ["validating", "failed"],
  ["validating", "cancelling"],
  ["validating", "cancelled"],
  ["validating", "expired"],
  ["in_progress", "finalizing"],
  ["in_progress", "cancelling"],
  ["in_progress", "expired"],
  ["in_progress", "failed"],
  ["finalizing", "completed"],
  ["finalizing", "failed"],
  ["finalizing", "expired"],
  ["cancelling", "cancelled"],
];

const batch = (status: BatchStatus) => ({ id: "batch_x", status }) as Batch;

describe("batch state machine", () => {
  it("ends a pause with the batch: a batch ending, by any edge, is no longer paused", () => {
    for (const [from, to] of ALLOWED) {
      const b = { ...batch(from), paused_at: 1_700_000_000 } as Batch;
      transition(b, to, 1_700_000_100);
      expect(b.paused_at, `${from} -> ${to}`).toBe(isEnding(to) ? null : 1_700_000_000);
    }
  });

  it("allows exactly OpenAI's edges", () => {
    for (const from of BATCH_STATUSES) {
      for (const to of BATCH_STATUSES) {
        const expected = ALLOWED.some(([a, b]) => a === from && b === to);
        expect(canTransition(from, to), `${from} -> ${to}`).toBe(expected);
      }
    }
  });

  it("knows the four final statuses", () => {
    expect(BATCH_STATUSES.filter(isFinal).sort()).toEqual(["cancelled", "completed", "expired", "failed"]);
    // Being cancelled or finalizing: no cancel or deadline may start another ending.
    expect(BATCH_STATUSES.filter(isEnding).sort()).toEqual(["cancelled", "cancelling", "completed", "expired", "failed", "finalizing"]);
  });

  it("stamps the entry time of each status", () => {
    const b = batch("validating");
    transition(b, "in_progress", 100);
    transition(b, "finalizing", 105);
    transition(b, "completed", 106);
    expect(b).toMatchObject({ status: "completed", in_progress_at: 100, finalizing_at: 105, completed_at: 106 });
    const c = batch("in_progress");
    transition(c, "cancelling", 7);
    transition(c, "cancelled", 8);
    expect(c).toMatchObject({ cancelling_at: 7, cancelled_at: 8 });
  });

  it("refuses forbidden edges and leaves the batch untouched", () => {
    const b = batch("completed");
    expect(() => transition(b, "in_progress", 1)).toThrow(InvalidTransitionError);
    expect(b.status).toBe("completed");
    expect(() => transition(batch("cancelling"), "completed", 1)).toThrow(/cannot become completed/);
    expect(() => transition(batch("in_progress"), "validating", 1)).toThrow(InvalidTransitionError);
    expect(() => transition(batch("finalizing"), "cancelling", 1)).toThrow(InvalidTransitionError);
  });
});
