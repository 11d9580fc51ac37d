// The cluster's figures: the queue and the simulated pools, each key's enqueued tokens, and the running totals the
// state keeps (batches, requests, deadlines, keys' tokens). Only the maintenance's leader exports them, so a sum
// over processes counts each once.
import client from "prom-client";
import { keyIdOfOwner } from "../config/keys.js";
import { type MetricKinds, PREFIX } from "./kinds.js";

/** The queue and pools, read at scrape time (the control plane's status satisfies it). */
export interface GaugeSource {
  queueStats(): { depth: number; max_depth: number } | Promise<{ depth: number; max_depth: number }>;
  poolStatus(): PoolGauges[] | Promise<PoolGauges[]>;
  /**
   * Whether this process exports the cluster's figures (queue, pools): only the maintenance's leader does, so
   * summing over processes counts them once. Absent: always (one process).
   */
  leader?(): boolean;
  /** The cluster's running totals kept in the state (batches:<status>, requests:<outcome>, deadlines:<result>). */
  totals?(): Promise<Record<string, number>>;
  /** What a key is called in labels: its id from the keys file, never its secret ("-": no key). */
  keyName?(owner: string): string;
  /** Each key's enqueued tokens by model now (the keys' ids). */
  enqueued?(): Promise<Array<{ key: string; model: string; tokens: number }>>;
}

export interface PoolGauges {
  name: string;
  capacity: number;
  in_use: number;
}

export interface ClusterMetrics {
  /** Queue and pool gauges read these at scrape time. */
  watch(status: GaugeSource): void;
}

/** The cluster's figures, from the leader only (none elsewhere). */
type ClusterSource = () => GaugeSource | undefined;

/** `tenants`: where each key's series go (served to admin keys only), apart from the cluster's. */
export function createClusterMetrics(kinds: MetricKinds, tenants: MetricKinds = kinds): ClusterMetrics {
  let status: GaugeSource | undefined;
  const cluster: ClusterSource = () => (status && status.leader?.() !== false ? status : undefined);
  totalsCounters(kinds, tenants, cluster);
  queueGauges(kinds, tenants, cluster);
  poolGauges(kinds, cluster);
  return {
    watch(s) {
      status = s;
    },
  };
}

/**
 * A counter of the cluster's totals, read from the state at scrape time by the maintenance's leader (elsewhere it
 * has no sample): a process that exits or loses the lease loses no count, and a sum over processes counts once.
 */
function fromTotals(
  cluster: ClusterSource,
  registers: client.Registry[],
  name: string,
  help: string,
  labelNames: string[],
  labelsOf: (total: string, source: GaugeSource) => Record<string, string> | undefined,
) {
  const seen = new Map<string, number>();
  return new client.Counter({
    name: `${PREFIX}${name}`,
    help,
    labelNames,
    registers,
    async collect() {
      const source = cluster();
      if (!source?.totals) {
        this.reset();
        seen.clear();
        return;
      }
      for (const [total, value] of Object.entries(await source.totals())) {
        const labels = labelsOf(total, source);
        if (!labels) continue;
        const added = value - (seen.get(total) ?? 0);
        if (added > 0) this.inc(labels, added);
        seen.set(total, value);
      }
    },
  });
}

/** The totals named `prefix` and a value, that value as `label`. */
const byPrefix = (label: string, prefix: string) => (total: string) =>
  total.startsWith(prefix) ? { [label]: total.slice(prefix.length) } : undefined;

/** Tokens by key, batches by status, requests by outcome, deadlines met or missed: counters of the state's totals. */
function totalsCounters(kinds: MetricKinds, tenants: MetricKinds, cluster: ClusterSource): void {
  fromTotals(
    cluster,
    tenants.registers,
    "key_tokens_total",
    "Tokens of ended batches by key (its id, never its secret), model and kind (input, cached, output); the leader's count.",
    ["key", "model", "kind"],
    (total, source) => {
      const m = /^key_tokens:([^|]*)\|(.*)\|(input|cached|output)$/.exec(total);
      if (!m) return undefined;
      return { key: m[1] === "-" ? "-" : (source.keyName?.(m[1]) ?? keyIdOfOwner(m[1])), model: m[2], kind: m[3] };
    },
  );
  fromTotals(
    cluster,
    kinds.registers,
    "batches_total",
    "Batches that reached a final status (the cluster's, from the leader).",
    ["status"],
    byPrefix("status", "batches:"),
  );
  fromTotals(
    cluster,
    kinds.registers,
    "requests_total",
    "Requests of ended batches, by outcome (the cluster's, from the leader).",
    ["outcome"],
    byPrefix("outcome", "requests:"),
  );
  fromTotals(
    cluster,
    kinds.registers,
    "sla_deadlines_total",
    "Batches that finished before their deadline (met) or expired at it (missed); the cluster's, from the leader.",
    ["result"],
    byPrefix("result", "deadlines:"),
  );
}

/** What waits: each key's enqueued tokens, the queue's depth and its bound. */
function queueGauges(kinds: MetricKinds, tenants: MetricKinds, cluster: ClusterSource): void {
  tenants.liveGauge(
    "key_enqueued_tokens",
    "Estimated tokens of each key's open batches, by model: what its enqueued-token limits count (the leader's figure).",
    async (g) => {
      g.reset();
      for (const e of (await cluster()?.enqueued?.()) ?? []) g.set({ key: e.key, model: e.model }, e.tokens);
    },
    ["key", "model"],
  );
  const queue = (read: (q: { depth: number; max_depth: number }) => number) => async (g: client.Gauge) => {
    g.reset();
    const source = cluster();
    if (source) g.set({ scope: "cluster" }, read(await source.queueStats()));
  };
  // Labelled (scope="cluster"), as an unlabelled gauge always has a sample: a process that is not the leader has none.
  kinds.liveGauge(
    "queue_depth",
    "Batches waiting for a pool slot (the maintenance's leader only).",
    queue((q) => q.depth),
    ["scope"],
  );
  kinds.liveGauge(
    "queue_max_depth",
    "Queued batches accepted before new ones get 429 (the leader only).",
    queue((q) => q.max_depth),
    ["scope"],
  );
}

/** Each simulated GPU pool's slots and those in use. */
function poolGauges(kinds: MetricKinds, cluster: ClusterSource): void {
  const perPool = (read: (p: PoolGauges) => number) => async (g: client.Gauge) => {
    g.reset();
    for (const p of (await cluster()?.poolStatus()) ?? []) g.set({ pool: p.name }, read(p));
  };
  kinds.liveGauge(
    "pool_capacity",
    "Slots of each simulated GPU pool.",
    perPool((p) => p.capacity),
    ["pool"],
  );
  kinds.liveGauge(
    "pool_in_use",
    "Slots of each simulated GPU pool held by running batches.",
    perPool((p) => p.in_use),
    ["pool"],
  );
}
