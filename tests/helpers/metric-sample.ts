// One sample of a Prometheus text page (/metrics), as the system tests read it.

/**
 * The value of the first sample of `name` whose labels begin with `labels` (a pattern, such as
 * `tier="default",model="[^"]+"`), in `text`; NaN where none matches.
 */
export function metricSample(text: string, name: string, labels: string): number {
  return Number(new RegExp(`^${name}\\{${labels}[^}]*\\} (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN);
}
