// Small summaries of timings.

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

export const sum = (values: readonly number[]) => values.reduce((s, v) => s + v, 0);

export const mib = (bytes: number | null | undefined) => (bytes == null || !Number.isFinite(bytes) ? null : Math.round(bytes / 2 ** 20));
