// Which batches are near their deadline (urgent work prefers dedicated workers and goes first).

/** Fraction of the window left under which a batch counts as urgent whatever its length. */
const URGENT_WINDOW_FRACTION = 0.1;

/**
 * Near its deadline: less than `urgentSeconds` left, or less than 10% of its completion window (the PostgreSQL
 * queue says the same in SQL).
 */
export function isUrgent(b: { submittedAt: number; deadlineAt: number }, now: number, urgentSeconds: number): boolean {
  const left = b.deadlineAt - now;
  return left < urgentSeconds || left < (b.deadlineAt - b.submittedAt) * URGENT_WINDOW_FRACTION;
}
