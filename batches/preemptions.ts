// Simulated spot reclaims at a configured rate (SPOT_PREEMPTIONS_PER_HOUR), in either mode.

/**
 * Spot reclaims at random, `perHour` on average (exponential gaps, as independent reclaims arrive), for testing
 * how batches survive them; 0: none.
 */
export function randomPreemptions(perHour: number, preempt: () => void): { stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  const next = () => {
    if (perHour <= 0) return;
    const ms = (-Math.log(1 - Math.random()) / perHour) * 3_600_000;
    timer = setTimeout(() => {
      preempt();
      next();
    }, ms);
    timer.unref();
  };
  next();
  return { stop: () => clearTimeout(timer) };
}
