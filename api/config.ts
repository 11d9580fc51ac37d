import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import YAML from "yaml";
import { z } from "zod";

const here = path.dirname(fileURLToPath(import.meta.url));
export const DEFAULT_MODEL_CONFIG = path.resolve(here, "../engine/model_config.yaml");

const int = (min: number) => z.coerce.number().int().min(min);

const ConfigSchema = z.object({
  port: int(0).max(65535),
  host: z.string().min(1),
  batchDir: z.string().min(1),
  modelPath: z.string(),
  maxQueueDepth: int(1),
  maxFileBytes: int(1),
  maxRequestsPerBatch: int(1),
  maxLineBytes: int(1),
  apiKeys: z.array(z.string().min(1)),
  fileExpirySeconds: int(1),
  /** How often the collector looks for expired files and batch folders. */
  collectIntervalSeconds: int(1),
  /** On SIGTERM/SIGINT, how long requests in flight may run on before they are checkpointed. */
  shutdownGraceSeconds: int(0),
  cancelGraceSeconds: int(0),
  logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]),
  engine: z.object({
    gpu: z.union([z.enum(["auto", "cuda", "vulkan"]), z.literal(false)]),
    threads: int(0),
    sequences: int(0),
    contextSize: int(64),
    embeddingContexts: int(1),
    reproducible: z.boolean({ error: "REPRODUCIBLE must be true or false" }),
  }),
  pipeline: z.object({ batchSize: int(1), concurrency: int(0) }),
  pools: z.object({
    spot: z.object({ capacity: int(0) }),
    dedicated: z.object({ capacity: int(0) }),
  }),
  slaUrgentSeconds: int(0),
  http: z.object({
    headersTimeoutSeconds: int(1),
    requestTimeoutSeconds: int(1),
    idleTimeoutSeconds: int(1),
    /** 0: half the process's descriptor limit (api/http/server.ts). */
    maxConnections: int(0),
  }),
});

export type Config = z.infer<typeof ConfigSchema>;

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

type Env = Record<string, string | undefined>;

/** true/false (also 1/0, yes/no, on/off); anything else is left for the schema to refuse. */
function booleanSetting(v: unknown): unknown {
  if (typeof v === "boolean") return v;
  const s = String(v).trim().toLowerCase();
  if (["true", "1", "yes", "on"].includes(s)) return true;
  if (["false", "0", "no", "off", ""].includes(s)) return false;
  return v;
}

function gpuSetting(v: unknown): unknown {
  if (v === false || v === "false" || v === "off" || v === "cpu") return false;
  return v;
}

/** Reads engine/model_config.yaml (or MODEL_CONFIG), applies environment overrides, validates once. */
export function loadConfig(env: Env = process.env): Config {
  const file = env.MODEL_CONFIG || DEFAULT_MODEL_CONFIG;
  let y: any;
  try {
    y = YAML.parse(readFileSync(file, "utf8")) ?? {};
  } catch (err) {
    throw new ConfigError(`cannot read model config ${file}: ${(err as Error).message}`);
  }
  const raw = {
    port: env.PORT ?? 8000,
    host: env.HOST ?? "0.0.0.0",
    batchDir: env.BATCH_DIR ?? "/tmp",
    modelPath: env.MODEL_PATH ?? y.model?.path ?? "",
    maxQueueDepth: env.MAX_QUEUE_DEPTH ?? 100,
    maxFileBytes: env.MAX_FILE_BYTES ?? 200 * 1024 * 1024,
    maxRequestsPerBatch: env.MAX_REQUESTS_PER_BATCH ?? 50_000,
    maxLineBytes: env.MAX_LINE_BYTES ?? 1024 * 1024,
    apiKeys: (env.API_KEYS ?? "")
      .split(",")
      .map((k) => k.trim())
      .filter(Boolean),
    fileExpirySeconds: env.FILE_EXPIRY_SECONDS ?? 30 * 24 * 3600,
    collectIntervalSeconds: env.COLLECT_INTERVAL_SECONDS ?? 3600,
    shutdownGraceSeconds: env.SHUTDOWN_GRACE_SECONDS ?? 10,
    cancelGraceSeconds: env.CANCEL_GRACE_SECONDS ?? 600,
    logLevel: env.LOG_LEVEL ?? "info",
    engine: {
      gpu: gpuSetting(env.GPU ?? y.engine?.gpu ?? "auto"),
      threads: env.THREADS ?? y.engine?.threads ?? 0,
      sequences: env.SEQUENCES ?? y.engine?.sequences ?? 0,
      contextSize: env.CONTEXT_SIZE ?? y.engine?.context_size ?? 1024,
      embeddingContexts: env.EMBEDDING_CONTEXTS ?? y.engine?.embedding_contexts ?? 2,
      reproducible: booleanSetting(env.REPRODUCIBLE ?? y.engine?.reproducible ?? false),
    },
    pipeline: {
      batchSize: env.PIPELINE_BATCH_SIZE ?? y.pipeline?.batch_size ?? 64,
      concurrency: env.PIPELINE_CONCURRENCY ?? y.pipeline?.concurrency ?? 0,
    },
    pools: {
      spot: { capacity: env.SPOT_CAPACITY ?? y.pools?.spot?.capacity ?? 2 },
      dedicated: { capacity: env.DEDICATED_CAPACITY ?? y.pools?.dedicated?.capacity ?? 1 },
    },
    slaUrgentSeconds: env.SLA_URGENT_SECONDS ?? y.sla?.urgent_seconds ?? 600,
    http: {
      headersTimeoutSeconds: env.HTTP_HEADERS_TIMEOUT_SECONDS ?? 20,
      requestTimeoutSeconds: env.HTTP_REQUEST_TIMEOUT_SECONDS ?? 900,
      idleTimeoutSeconds: env.HTTP_IDLE_TIMEOUT_SECONDS ?? 120,
      maxConnections: env.MAX_CONNECTIONS ?? 0,
    },
  };
  const parsed = ConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
    throw new ConfigError(`invalid configuration: ${issues}`);
  }
  const cfg = parsed.data;
  if (cfg.pools.spot.capacity + cfg.pools.dedicated.capacity < 1) {
    throw new ConfigError("invalid configuration: pools: spot and dedicated capacity are both 0, no job could ever run");
  }
  return { ...cfg, batchDir: path.resolve(cfg.batchDir), modelPath: cfg.modelPath ? path.resolve(cfg.modelPath) : "" };
}
