// Finding stop strings in text that grows a token at a time.

export interface StopHit {
  /** Where the stop string starts; the answer is the text before it. */
  index: number;
  stop: string;
}

/**
 * The earliest stop string in `text` that ends after `checkedUpTo` (the text length at the previous check):
 * a stop string may straddle the boundary between two tokens, so the search starts far enough back.
 */
export function findStop(text: string, stops: readonly string[], checkedUpTo = 0): StopHit | null {
  let hit: StopHit | null = null;
  for (const stop of stops) {
    if (!stop) continue;
    const index = text.indexOf(stop, Math.max(0, checkedUpTo - stop.length + 1));
    if (index >= 0 && (hit === null || index < hit.index)) hit = { index, stop };
  }
  return hit;
}
