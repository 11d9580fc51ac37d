// What the app is built from: every port and reading its routes use. A leaf module, so the route modules can name it
// without importing the app that mounts them.
import type pino from "pino";
import type { ModelRegistry } from "../../backends/registry.js";
import type { Config } from "../../config/config.js";
import type { DatasetBatches } from "../../domain/dataset-batches.js";
import type { BatchService, BatchViews, ControlPlaneStatus, FileStore, UploadStore } from "../../domain/ports.js";
import type { SyncInference, SyncTargets } from "../../domain/sync-inference.js";
import type { Organization } from "../../domain/usage.js";
import type { Metrics } from "../../metrics/metrics.js";
import type { SeriesPoint } from "../../metrics/series.js";
import type { BackendInfo, BackendStats } from "../../openai/backend.js";

/**
 * Forgets remembered answers: those an owner's requests read (its key's scope; null: the open API's), or with no
 * owner every one; how many.
 */
export type ResultCachePurge = (owner?: string | null) => Promise<number>;

export interface AppDeps {
  config: Pick<Config, "keys" | "host" | "maxFileBytes" | "maxLineBytes" | "batchDir" | "corsOrigins">;
  files: FileStore;
  batches: BatchService;
  /** The console's views (a batch inspected, a search), which Anthropic's list reads too. */
  views: BatchViews;
  /** Usage, costs and keys, for admin keys (GET /v1/organization/...). */
  organization?: Organization;
  /** The result cache's purge (DELETE /v1/cache); absent where the cache is off. */
  resultCachePurge?: ResultCachePurge;
  /** Dataset jobs (POST /v1/dataset_batches, GET /v1/batches/{id}/table). */
  datasets?: DatasetBatches;
  /** Synchronous requests (POST /v1/chat/completions and the other endpoints); absent where no model is served. */
  inference?: SyncInference;
  /** An API server's (ROLE=api): the workers its synchronous requests are sent to. */
  syncTargets?: SyncTargets;
  /** The Uploads API (POST /v1/uploads...). */
  uploads?: UploadStore;
  status: ControlPlaneStatus;
  /** Null until the model is loaded (then /ready answers 503). */
  backendInfo: () => BackendInfo | null;
  /** True once a SIGTERM's drain began: /ready answers 503 so that load balancers stop sending work here. */
  draining?: () => boolean;
  /** The disk under BATCH_DIR: `full` or `read_only` while the service serves reads only (on /ready). */
  storage?: () => string;
  /** A request's write met a full or read-only disk: told before the 507 or 503 goes out, so /ready agrees. */
  storageFault?: (err: unknown) => void;
  /** Resolves while the state and the blob store answer (else /ready answers 503 with the domain's reason). */
  reachable?: () => Promise<void>;
  /** The models served (GET /v1/models). */
  registry: ModelRegistry;
  /** Their state (GET /ready, the console). */
  modelStatus?: () => Array<{ name: string; kind: string; state: string; batches: number; bytes?: number }>;
  /** Each upstream model's flow control (the console). */
  upstreams?: () => Array<{ model: string; stats: BackendStats }>;
  /** The console's live charts. */
  series?: () => SeriesPoint[];
  logger: pino.Logger;
  /** Serves GET /metrics and counts every request when set. */
  metrics?: Metrics;
  /** False for a distributed worker: health, readiness, docs and metrics only (default true). */
  api?: boolean;
}
