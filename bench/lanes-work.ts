// What the interactive requests' own work leaves a batch beside them: the lanes part's estimate (lanes.ts), as
// the log and the report both say it.

/**
 * The interactive requests' own work, done as lines of the batch (which orders them as it orders its own, so they
 * cost no more than they would arriving one by one): what each costs the machine with nobody waiting for it. If each
 * request costs that beside the batch too, the batch keeps at most `bound` of its pace beside `rate` of them a second.
 * An estimate from two runs, which this machine's pace moves by a tenth or more between.
 */
export interface LanesWork {
  /** The requests, as lines of the batch: as many as were answered beside it, at most as many as its lines. */
  requests: number;
  batchSeconds: number;
  /** 1 - rate x (batchSeconds - the batch alone's) / requests; 0 or below: the requests alone ask the whole machine. */
  bound: number;
}

/** What a LanesWork estimate says, in words. */
export function workText(work: LanesWork): string {
  if (work.bound <= 0) return `the requests alone ask ${(1 - work.bound).toFixed(2)}x of the machine: nothing is left for the batch`;
  if (work.bound >= 1) return "the requests cost the batch nothing measurable (within the runs' noise)";
  return `their own work leaves the batch at most about ${work.bound.toFixed(2)}x of its pace`;
}
