import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import YAML from "yaml";
import { z } from "zod";

const here = path.dirname(fileURLToPath(import.meta.url));
export const DEFAULT_MODEL_CONFIG = path.resolve(here, "./model_config.yaml");

const int = (min: number) => {
  const error = `must be a whole number >= ${min}`;
  return z.coerce.number({ error }).int({ error }).min(min, { error });
};

const ConfigSchema = z.object({
  port: int(0).max(65535, { error: "must be a port number, 0 to 65535" }),
  host: z.string().min(1),
  batchDir: z.string().min(1),
  modelPath: z.string(),
  modelsFile: z.string(),
  modelMemoryMb: int(0),
  modelIdleSeconds: int(0),
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
  logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], {
    error: "must be one of fatal, error, warn, info, debug, trace, silent",
  }),
  engine: z.object({
    gpu: z.union([z.enum(["auto", "cuda", "vulkan"]), z.literal(false)], { error: "must be auto, cuda, vulkan or false" }),
    threads: int(0),
    sequences: int(0),
    contexts: int(0),
    contextSize: int(64),
    embeddingContexts: int(0),
    reproducible: z.boolean({ error: "must be true or false" }),
    prefixCopy: z.boolean({ error: "must be true or false" }),
  }),
  pipeline: z.object({
    batchSize: int(1),
    concurrency: int(0),
    order: z.enum(["cost", "file"], { error: "must be cost or file" }),
  }),
  pools: z.object({
    spot: z.object({
      capacity: int(0),
      preemptCooldownSeconds: int(0),
      preemptionsPerHour: z.coerce
        .number({ error: "must be a number >= 0" })
        .min(0, { error: "must be a number >= 0" })
        .max(36_000, { error: "must be at most 36000" }),
    }),
    dedicated: z.object({ capacity: int(0) }),
  }),
  slaUrgentSeconds: int(0),
  /** Shared state for many processes (DATABASE_URL); off (embedded) when the URL is empty. */
  cluster: z.object({
    databaseUrl: z.string(),
    role: z.enum(["api", "worker", "all"], { error: "must be api, worker or all" }),
    shardSize: int(1),
    checkpointSeconds: int(1),
    leaseSeconds: int(3),
    workerPool: z.enum(["spot", "dedicated"], { error: "must be spot or dedicated" }),
    workerCapacity: int(1),
    workerId: z.string(),
  }),
  s3: z.object({
    endpoint: z.string(),
    bucket: z.string(),
    region: z.string().min(1),
    prefix: z.string(),
    accessKeyId: z.string(),
    secretAccessKey: z.string(),
    forcePathStyle: z.boolean({ error: "must be true or false" }),
  }),
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

/**
 * Every setting: its place in Config, the environment variable that sets it, its key in the YAML file,
 * and its default. Errors name the variable (or YAML key) the user set, with the value given.
 */
const SETTINGS: Array<{ path: string; env: string; yaml?: string; default: unknown; read?: (v: unknown) => unknown }> = [
  { path: "port", env: "PORT", default: 8000 },
  { path: "host", env: "HOST", default: "0.0.0.0" },
  { path: "batchDir", env: "BATCH_DIR", default: "/tmp" },
  { path: "modelPath", env: "MODEL_PATH", yaml: "model.path", default: "" },
  { path: "modelsFile", env: "MODELS_FILE", yaml: "model.models_file", default: "" },
  { path: "modelMemoryMb", env: "MODEL_MEMORY_MB", yaml: "model.memory_mb", default: 0 },
  { path: "modelIdleSeconds", env: "MODEL_IDLE_SECONDS", yaml: "model.idle_seconds", default: 300 },
  { path: "maxQueueDepth", env: "MAX_QUEUE_DEPTH", default: 100 },
  { path: "maxFileBytes", env: "MAX_FILE_BYTES", default: 200 * 1024 * 1024 },
  { path: "maxRequestsPerBatch", env: "MAX_REQUESTS_PER_BATCH", default: 50_000 },
  { path: "maxLineBytes", env: "MAX_LINE_BYTES", default: 1024 * 1024 },
  {
    path: "apiKeys",
    env: "API_KEYS",
    default: "",
    read: (v) =>
      String(v)
        .split(",")
        .map((k) => k.trim())
        .filter(Boolean),
  },
  { path: "fileExpirySeconds", env: "FILE_EXPIRY_SECONDS", default: 30 * 24 * 3600 },
  { path: "collectIntervalSeconds", env: "COLLECT_INTERVAL_SECONDS", default: 3600 },
  { path: "shutdownGraceSeconds", env: "SHUTDOWN_GRACE_SECONDS", default: 10 },
  { path: "cancelGraceSeconds", env: "CANCEL_GRACE_SECONDS", default: 600 },
  { path: "logLevel", env: "LOG_LEVEL", default: "info" },
  { path: "engine.gpu", env: "GPU", yaml: "engine.gpu", default: "auto", read: gpuSetting },
  { path: "engine.threads", env: "THREADS", yaml: "engine.threads", default: 0 },
  { path: "engine.sequences", env: "SEQUENCES", yaml: "engine.sequences", default: 0 },
  { path: "engine.contexts", env: "CONTEXTS", yaml: "engine.contexts", default: 0 },
  { path: "engine.contextSize", env: "CONTEXT_SIZE", yaml: "engine.context_size", default: 1024 },
  { path: "engine.embeddingContexts", env: "EMBEDDING_CONTEXTS", yaml: "engine.embedding_contexts", default: 0 },
  { path: "engine.reproducible", env: "REPRODUCIBLE", yaml: "engine.reproducible", default: false, read: booleanSetting },
  { path: "engine.prefixCopy", env: "PREFIX_COPY", yaml: "engine.prefix_copy", default: true, read: booleanSetting },
  { path: "pipeline.batchSize", env: "PIPELINE_BATCH_SIZE", yaml: "pipeline.batch_size", default: 64 },
  { path: "pipeline.concurrency", env: "PIPELINE_CONCURRENCY", yaml: "pipeline.concurrency", default: 0 },
  { path: "pipeline.order", env: "BATCH_ORDER", yaml: "pipeline.order", default: "cost" },
  { path: "pools.spot.capacity", env: "SPOT_CAPACITY", yaml: "pools.spot.capacity", default: 2 },
  {
    path: "pools.spot.preemptCooldownSeconds",
    env: "SPOT_PREEMPT_COOLDOWN_SECONDS",
    yaml: "pools.spot.preempt_cooldown_seconds",
    default: 60,
  },
  { path: "pools.spot.preemptionsPerHour", env: "SPOT_PREEMPTIONS_PER_HOUR", yaml: "pools.spot.preemptions_per_hour", default: 0 },
  { path: "pools.dedicated.capacity", env: "DEDICATED_CAPACITY", yaml: "pools.dedicated.capacity", default: 1 },
  { path: "slaUrgentSeconds", env: "SLA_URGENT_SECONDS", yaml: "sla.urgent_seconds", default: 600 },
  { path: "cluster.databaseUrl", env: "DATABASE_URL", default: "" },
  { path: "cluster.role", env: "ROLE", default: "all" },
  { path: "cluster.shardSize", env: "SHARD_SIZE", default: 1000 },
  { path: "cluster.checkpointSeconds", env: "CHECKPOINT_SECONDS", default: 10 },
  { path: "cluster.leaseSeconds", env: "LEASE_SECONDS", default: 30 },
  { path: "cluster.workerPool", env: "WORKER_POOL", default: "dedicated" },
  { path: "cluster.workerCapacity", env: "WORKER_CAPACITY", default: 2 },
  { path: "cluster.workerId", env: "WORKER_ID", default: "" },
  { path: "s3.endpoint", env: "S3_ENDPOINT", default: "" },
  { path: "s3.bucket", env: "S3_BUCKET", default: "" },
  { path: "s3.region", env: "S3_REGION", default: "us-east-1" },
  { path: "s3.prefix", env: "S3_PREFIX", default: "" },
  { path: "s3.accessKeyId", env: "S3_ACCESS_KEY_ID", default: "" },
  { path: "s3.secretAccessKey", env: "S3_SECRET_ACCESS_KEY", default: "" },
  { path: "s3.forcePathStyle", env: "S3_FORCE_PATH_STYLE", default: true, read: booleanSetting },
  { path: "http.headersTimeoutSeconds", env: "HTTP_HEADERS_TIMEOUT_SECONDS", default: 20 },
  { path: "http.requestTimeoutSeconds", env: "HTTP_REQUEST_TIMEOUT_SECONDS", default: 900 },
  { path: "http.idleTimeoutSeconds", env: "HTTP_IDLE_TIMEOUT_SECONDS", default: 120 },
  { path: "http.maxConnections", env: "MAX_CONNECTIONS", default: 0 },
];

const at = (obj: any, dotted: string): unknown => dotted.split(".").reduce((o, k) => (o == null ? undefined : o[k]), obj);

function setAt(obj: Record<string, any>, dotted: string, value: unknown): void {
  const keys = dotted.split(".");
  const last = keys.pop() as string;
  let o = obj;
  for (const k of keys) o = o[k] ??= {};
  o[last] = value;
}

/** Reads config/model_config.yaml (or MODEL_CONFIG), applies environment overrides, validates once. */
export function loadConfig(env: Env = process.env): Config {
  const file = env.MODEL_CONFIG || DEFAULT_MODEL_CONFIG;
  let y: any;
  try {
    y = YAML.parse(readFileSync(file, "utf8")) ?? {};
  } catch (err) {
    throw new ConfigError(`cannot read model config ${file}: ${(err as Error).message}`);
  }
  const raw: Record<string, any> = {};
  const given = new Map<string, string>();
  for (const s of SETTINGS) {
    const fromEnv = env[s.env];
    const fromYaml = s.yaml ? at(y, s.yaml) : undefined;
    if (fromEnv !== undefined) given.set(s.path, `${s.env}=${fromEnv}`);
    else if (fromYaml !== undefined) given.set(s.path, `${s.yaml}: ${JSON.stringify(fromYaml)} in ${file}`);
    const value = fromEnv ?? fromYaml ?? s.default;
    setAt(raw, s.path, s.read ? s.read(value) : value);
  }
  const parsed = ConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => {
      const path = i.path.join(".");
      const setting = SETTINGS.find((s) => s.path === path);
      return `${given.get(path) ?? setting?.env ?? path}: ${i.message}`;
    });
    throw new ConfigError(`invalid configuration: ${issues.join("; ")}`);
  }
  const cfg = parsed.data;
  if (cfg.pools.spot.capacity + cfg.pools.dedicated.capacity < 1) {
    throw new ConfigError("invalid configuration: pools: spot and dedicated capacity are both 0, no job could ever run");
  }
  checkCluster(cfg, given);
  if (cfg.modelsFile && cfg.modelPath) {
    throw new ConfigError("invalid configuration: MODELS_FILE and MODEL_PATH are both set; name the model in the models file instead");
  }
  return {
    ...cfg,
    batchDir: path.resolve(cfg.batchDir),
    modelPath: cfg.modelPath ? path.resolve(cfg.modelPath) : "",
    modelsFile: cfg.modelsFile ? path.resolve(cfg.modelsFile) : "",
  };
}

/** What only the distributed mode reads: on one process a batch is one shard, run by the simulated pools. */
const DISTRIBUTED_ONLY = [
  "cluster.shardSize",
  "cluster.checkpointSeconds",
  "cluster.leaseSeconds",
  "cluster.workerPool",
  "cluster.workerCapacity",
  "cluster.workerId",
];

/** Shared state needs its database; a role other than `all`, S3 storage and the shard settings only make sense with one. */
function checkCluster(cfg: Config, given: Map<string, string>): void {
  const { cluster, s3 } = cfg;
  const fail = (why: string) => {
    throw new ConfigError(`invalid configuration: ${why}`);
  };
  if (!cluster.databaseUrl) {
    if (cluster.role !== "all") fail(`ROLE=${cluster.role} needs DATABASE_URL: without it the service is one process that does everything`);
    if (s3.bucket || s3.endpoint) fail("S3_BUCKET/S3_ENDPOINT need DATABASE_URL: shared storage is used only in the distributed mode");
    const set = DISTRIBUTED_ONLY.filter((p) => given.has(p)).map((p) => given.get(p));
    if (set.length > 0)
      fail(
        `${set.join(", ")}: only the distributed mode (DATABASE_URL) uses this; on one process a batch is one shard on the simulated pools`,
      );
    return;
  }
  if (!/^postgres(ql)?:\/\//.test(cluster.databaseUrl)) fail("DATABASE_URL: must be a postgres:// or postgresql:// URL");
  if (s3.endpoint && !s3.bucket) fail("S3_ENDPOINT is set but S3_BUCKET is not: name the bucket to use");
  if (Boolean(s3.accessKeyId) !== Boolean(s3.secretAccessKey))
    fail("S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together: set both, or neither (the AWS SDK's default credentials)");
  if (cluster.checkpointSeconds >= cluster.leaseSeconds)
    fail(`CHECKPOINT_SECONDS=${cluster.checkpointSeconds} must be below LEASE_SECONDS=${cluster.leaseSeconds}`);
}

/**
 * What can be checked on disk before the model loads: BATCH_DIR must be a folder (or not exist yet) and
 * MODEL_PATH, when set, a file. Throws one ConfigError naming the setting.
 */
export function checkPaths(config: Pick<Config, "batchDir" | "modelPath">): void {
  const kind = (p: string) => {
    try {
      return statSync(p).isDirectory() ? "folder" : "file";
    } catch {
      return "missing";
    }
  };
  if (kind(config.batchDir) === "file")
    throw new ConfigError(`BATCH_DIR=${config.batchDir}: is a file; it must be a folder (or not exist yet)`);
  if (config.modelPath) {
    const k = kind(config.modelPath);
    if (k !== "file")
      throw new ConfigError(`MODEL_PATH=${config.modelPath}: ${k === "missing" ? "no such file" : "is a folder"}; it must be a .gguf file`);
  }
}
