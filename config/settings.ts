// Every setting, declared once: its place in Config (the tree's shape), its environment variable, its key in the
// YAML file, its default, its schema and its help text. config.ts reads and checks them; `npm start -- --help`
// prints them; docs/configuration.md's table is written from them (npm run docs:config) and a test holds it to them.
import { z } from "zod";
import type { ApiKey } from "./keys.js";

export interface Setting<S extends z.ZodType = z.ZodType> {
  env: string;
  /** Its dotted key in the YAML file (config/model_config.yaml or MODEL_CONFIG), where the file may set it. */
  yaml?: string;
  default: unknown;
  schema: S;
  help: string;
  /** Turns what the environment or the file gave into what the schema checks (booleans, lists). */
  read?: (v: unknown) => unknown;
  /** Only the distributed mode (DATABASE_URL) reads it: setting it without one is refused. */
  distributedOnly?: boolean;
}

export type SettingsTree = { [key: string]: Setting | SettingsTree };

/** The checked value of each setting, in the tree's shape. */
export type ConfigOf<T extends SettingsTree> = {
  [K in keyof T]: T[K] extends Setting<infer S> ? z.infer<S> : T[K] extends SettingsTree ? ConfigOf<T[K]> : never;
};

export const isSetting = (node: Setting | SettingsTree): node is Setting => "schema" in node && node.schema instanceof z.ZodType;

const setting = <S extends z.ZodType>(s: Setting<S>): Setting<S> => s;

/**
 * A whole number: a YAML number, or decimal digits from the environment (spaces around them allowed). Number()
 * would read `PORT=` as 0 (any free port) and take `0x1F40`, `1e3` or `+2`; those are refused, naming the variable.
 */
const int = (min: number, max?: { value: number; error: string }) => {
  const error = `must be a whole number >= ${min}`;
  const number = z.number({ error }).int({ error }).min(min, { error });
  return z.preprocess(
    (v) => (typeof v === "string" && /^\s*[0-9]+\s*$/.test(v) ? Number(v) : v),
    max ? number.max(max.value, { error: max.error }) : number,
  );
};
/** Units a byte size may be written in: decimal (kB, MB, GB, TB) and binary (KiB, MiB, GiB, TiB), as `df -H`/`-h`. */
const BYTE_UNITS: Record<string, number> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 2 ** 10,
  mib: 2 ** 20,
  gib: 2 ** 30,
  tib: 2 ** 40,
};
/** A byte count: a whole number, or a number with a unit ("512MB", "10 GiB", "1.5GB"). */
const bytes = (min: number) => {
  const error = `must be a whole number of bytes >= ${min}, or a size such as 512MB or 10GiB`;
  return z.preprocess(
    (v) => {
      if (typeof v !== "string") return v;
      const m = /^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)\s*$/i.exec(v);
      const unit = m && BYTE_UNITS[(m[2] || "b").toLowerCase()];
      return m && unit ? Math.round(Number(m[1]) * unit) : v;
    },
    z.number({ error }).int({ error }).min(min, { error }),
  );
};
const bool = () => z.boolean({ error: "must be true or false (or on/off, yes/no, 1/0)" });

/** true/false (also 1/0, yes/no, on/off); anything else is left for the schema to refuse. */
function booleanSetting(v: unknown): unknown {
  // A YAML list or map is left for the schema to refuse: [true] is no boolean, though its text is "true".
  if (typeof v === "boolean" || (typeof v === "object" && v !== null)) return v;
  const s = String(v).trim().toLowerCase();
  if (["true", "1", "yes", "on"].includes(s)) return true;
  if (["false", "0", "no", "off", ""].includes(s)) return false;
  return v;
}

/** "auto", or a boolean spelt as booleanSetting reads it; empty (a variable set to nothing) is the default, auto. */
function autoOrBooleanSetting(v: unknown): unknown {
  if (typeof v === "object" && v !== null) return v;
  const s = String(v).trim().toLowerCase();
  return s === "auto" || s === "" ? "auto" : booleanSetting(v);
}
const autoOrBoolean = z.union([z.boolean(), z.literal("auto")], { error: "must be auto, true or false (or on/off, yes/no, 1/0)" });

/** An origin as a browser sends it in `Origin`: http(s), a host and an optional port; no path, no wildcard. */
const isOrigin = (o: string) => /^https?:\/\/[^/?#*@\s]+\/?$/i.test(o) && URL.canParse(o);
const originList = () =>
  z
    .array(z.string())
    .superRefine((list, ctx) => {
      const bad = list.find((o) => !isOrigin(o));
      if (bad !== undefined)
        ctx.addIssue({
          code: "custom",
          message: `'${bad}' is not an origin such as https://app.example.com (scheme, host, port; no path, no *)`,
        });
    })
    .transform((list) => list.map((o) => new URL(o).origin));

const gpuSetting = (v: unknown): unknown => (v === false || v === "false" || v === "off" || v === "cpu" ? false : v);

const keyList = (v: unknown) =>
  String(v)
    .split(",")
    .map((k) => k.trim())
    .filter(Boolean);

export const SETTINGS = {
  port: setting({
    env: "PORT",
    default: 8000,
    schema: int(0, { value: 65535, error: "must be a port number, 0 to 65535" }),
    help: "where the HTTP server listens (0: any free port)",
  }),
  host: setting({
    env: "HOST",
    default: "",
    schema: z.string(),
    help: "the address the HTTP server listens on (default: 0.0.0.0 with API_KEYS, else 127.0.0.1: an open API stays on loopback)",
  }),
  batchDir: setting({
    env: "BATCH_DIR",
    default: "/tmp",
    schema: z.string().min(1),
    help: "batch folders BATCH_DIR/<batch_id>/ and uploaded files BATCH_DIR/files/",
  }),
  modelPath: setting({
    env: "MODEL_PATH",
    yaml: "model.path",
    default: "",
    schema: z.string(),
    help: "the one model, answering to every name: a .gguf file, hf:<owner>/<repo>[:<quant>] or an https:// URL of a .gguf, downloaded once into MODELS_DIR (default: the generated model)",
  }),
  modelsDir: setting({
    env: "MODELS_DIR",
    yaml: "model.models_dir",
    default: "models",
    schema: z.string().min(1),
    help: "where models named by hf: or a URL are downloaded to, once, and found on the next start",
  }),
  hfEndpoint: setting({
    env: "HF_ENDPOINT",
    default: "https://huggingface.co",
    schema: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }),
    help: "where hf: models are downloaded from (a Hugging Face mirror)",
  }),
  hfToken: setting({
    env: "HF_TOKEN",
    default: "",
    schema: z.string(),
    help: "a Hugging Face access token, for gated or private hf: models (sent to HF_ENDPOINT only)",
  }),
  modelsFile: setting({
    env: "MODELS_FILE",
    yaml: "model.models_file",
    default: "",
    schema: z.string(),
    help: "a models file (YAML): several models, local or upstream; excludes MODEL_PATH",
  }),
  modelMemoryMb: setting({
    env: "MODEL_MEMORY_MB",
    yaml: "model.memory_mb",
    default: 0,
    schema: int(0),
    help: "what the local models loaded at once may take together (0: 3/4 of the GPU's memory, else of the RAM the process may use: its cgroup limit in a container)",
  }),
  modelIdleSeconds: setting({
    env: "MODEL_IDLE_SECONDS",
    yaml: "model.idle_seconds",
    default: 300,
    schema: int(0),
    help: "a local model unused this long is unloaded (with a models file)",
  }),
  maxQueueDepth: setting({
    env: "MAX_QUEUE_DEPTH",
    default: 100,
    schema: int(1),
    help: "queued batches before 429 (shared between keys: docs/teams.md)",
  }),
  maxFileBytes: setting({
    env: "MAX_FILE_BYTES",
    default: 200 * 1024 * 1024,
    schema: bytes(1),
    help: "largest upload, in bytes (or with a unit: 512MB, 1GiB)",
  }),
  maxRequestsPerBatch: setting({ env: "MAX_REQUESTS_PER_BATCH", default: 50_000, schema: int(1), help: "lines per batch file" }),
  maxLineBytes: setting({
    env: "MAX_LINE_BYTES",
    default: 1024 * 1024,
    schema: bytes(1),
    help: "longest line in a batch file, in bytes (or with a unit: 4MiB)",
  }),
  apiKeys: setting({
    env: "API_KEYS",
    default: "",
    schema: z.array(z.string().min(1)),
    read: keyList,
    help: "comma-separated keys; each key sees only its own files and batches (none: the API is open)",
  }),
  keysFile: setting({
    env: "KEYS_FILE",
    default: "",
    schema: z.string(),
    help: "a YAML file of keys with properties: id, sha256 of the secret, admin, weight, enqueued_token_limits, webhook (docs/teams.md)",
  }),
  requireApiKeys: setting({
    env: "REQUIRE_API_KEYS",
    default: false,
    schema: bool(),
    read: booleanSetting,
    help: "refuse to start without API_KEYS or KEYS_FILE (deployments set it, so a missing secret cannot leave the API open)",
  }),
  corsOrigins: setting({
    env: "CORS_ORIGINS",
    default: "",
    schema: originList(),
    read: keyList,
    help: "comma-separated origins (https://app.example.com) whose web pages may call the API from the browser; a page of any other site is refused every request that changes something (403), with keys or without (the console and Swagger UI, served from this origin, always may); an open API on loopback also answers to their hosts' names, besides its address and localhost",
  }),
  fileExpirySeconds: setting({
    env: "FILE_EXPIRY_SECONDS",
    default: 30 * 24 * 3600,
    schema: int(1),
    help: "when files and batch folders (counted from the batch's end) expire",
  }),
  collectIntervalSeconds: setting({
    env: "COLLECT_INTERVAL_SECONDS",
    default: 3600,
    schema: int(1),
    help: "how often expired files and ended batches' folders are deleted",
  }),
  shutdownGraceSeconds: setting({
    env: "SHUTDOWN_GRACE_SECONDS",
    default: 10,
    schema: int(0),
    help: "on SIGTERM/SIGINT, how long requests in flight may finish before they are checkpointed",
  }),
  shutdownDrainSeconds: setting({
    env: "SHUTDOWN_DRAIN_SECONDS",
    default: 5,
    schema: int(0),
    help: "on SIGTERM, how long connections and requests are still taken, with /ready answering 503, before the stop",
  }),
  cancelGraceSeconds: setting({
    env: "CANCEL_GRACE_SECONDS",
    default: 600,
    schema: int(0),
    help: "on cancel of a running batch, how long the requests already running may finish",
  }),
  logLevel: setting({
    env: "LOG_LEVEL",
    default: "info",
    schema: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], {
      error: "must be one of fatal, error, warn, info, debug, trace, silent",
    }),
    help: "pino level",
  }),
  envNotSettings: setting({
    env: "ENV_NOT_SETTINGS",
    default: "",
    schema: z.array(z.string().min(1)),
    read: keyList,
    help: "comma-separated variables of the environment meant for other programs though spelt like a setting (else the start is refused)",
  }),
  engine: {
    gpu: setting({
      env: "GPU",
      yaml: "engine.gpu",
      default: "auto",
      schema: z.union([z.enum(["auto", "cuda", "vulkan"]), z.literal(false)], { error: "must be auto, cuda, vulkan or false" }),
      read: gpuSetting,
      help: "auto (CUDA, then Vulkan, then CPU), cuda, vulkan, false",
    }),
    threads: setting({
      env: "THREADS",
      yaml: "engine.threads",
      default: 0,
      schema: int(0),
      help: "llama.cpp threads per context (0: auto)",
    }),
    sequences: setting({
      env: "SEQUENCES",
      yaml: "engine.sequences",
      default: 0,
      schema: int(0),
      help: "sequences decoded together, over all contexts (0: auto)",
    }),
    contexts: setting({
      env: "CONTEXTS",
      yaml: "engine.contexts",
      default: 0,
      schema: int(0),
      help: "generation contexts decoding at once (0: auto)",
    }),
    contextSize: setting({
      env: "CONTEXT_SIZE",
      yaml: "engine.context_size",
      default: 1024,
      schema: int(64),
      help: "tokens per sequence (at least 64): a prompt and its answer get this many, not what llama.cpp rounds the cache up to",
    }),
    embeddingContexts: setting({
      env: "EMBEDDING_CONTEXTS",
      yaml: "engine.embedding_contexts",
      default: 0,
      schema: int(0),
      help: "parallel embedding contexts (0: auto)",
    }),
    reproducible: setting({
      env: "REPRODUCIBLE",
      yaml: "engine.reproducible",
      default: false,
      schema: bool(),
      read: booleanSetting,
      help: "every request computed alone and from scratch, so a seeded line's answer never depends on the batch",
    }),
    build: setting({
      env: "ENGINE_BUILD",
      yaml: "engine.build",
      default: "auto",
      schema: z.enum(["auto", "prebuilt", "patched"], { error: "must be auto, prebuilt or patched" }),
      help: "which node-llama-cpp build runs: auto (the patched build of npm run build:engine where it exists, else the prebuilt binaries), prebuilt, patched (refuse to start without it)",
    }),
    kvUnified: setting({
      env: "KV_UNIFIED",
      yaml: "engine.kv_unified",
      default: "auto" as boolean | "auto",
      schema: autoOrBoolean,
      read: autoOrBooleanSetting,
      help: "one KV cache for all sequences of a context (patched build only): true, false (a stream per sequence), or auto, chosen per batch run: unified where at least half its lines open like another line (a shared prefix is then stored once and copied for free, 1.2-1.5x faster), a stream per sequence for lines that share nothing (where unified took about 1.4x as long)",
    }),
    flashAttention: setting({
      env: "FLASH_ATTENTION",
      yaml: "engine.flash_attention",
      default: "auto" as boolean | "auto",
      schema: autoOrBoolean,
      read: autoOrBooleanSetting,
      help: "llama.cpp's flash attention: auto (on GPU, and on CPU for attention heads 32 wide or more, llama.cpp decides; off for narrower heads, where long prompts ran slower with it), true (on), false (off)",
    }),
    prefixCopy: setting({
      env: "PREFIX_COPY",
      yaml: "engine.prefix_copy",
      default: true,
      schema: bool(),
      read: booleanSetting,
      help: "copy a shared prompt opening between sequences of a context instead of evaluating it again",
    }),
  },
  pipeline: {
    batchSize: setting({
      env: "PIPELINE_BATCH_SIZE",
      yaml: "pipeline.batch_size",
      default: 64,
      schema: int(1),
      help: "map-batches group size",
    }),
    concurrency: setting({
      env: "PIPELINE_CONCURRENCY",
      yaml: "pipeline.concurrency",
      default: 0,
      schema: int(0),
      help: "requests in flight per batch (0: the backend's own, twice the engine's sequences, and four times that where the result cache stores each answer across a network (PostgreSQL's) before its line is written, of which the backend's own compute at once)",
    }),
    order: setting({
      env: "BATCH_ORDER",
      yaml: "pipeline.order",
      default: "cost",
      schema: z.enum(["cost", "interleave", "file"], { error: "must be cost, interleave or file" }),
      help: "the order a batch's lines start in: cost (costliest first, prefix families together, or the order an upstream's prefix routing asks for), interleave (prefix families take turns) or file",
    }),
  },
  lanes: {
    interactiveMaxShare: setting({
      env: "INTERACTIVE_MAX_SHARE",
      yaml: "lanes.interactive_max_share",
      default: 0.5,
      schema: z.coerce
        .number({ error: "must be a number in (0, 1]" })
        .gt(0, { error: "must be a number in (0, 1]" })
        .max(1, { error: "must be a number in (0, 1]" }),
      help: "of a model's concurrency (on the local engine twice its sequences, so 0.5 is as many requests as it has sequences), the share synchronous requests at the default tier may hold at once (at least one)",
    }),
    interactiveQueueMax: setting({
      env: "INTERACTIVE_QUEUE_MAX",
      yaml: "lanes.interactive_queue_max",
      default: 64,
      schema: int(0),
      help: "synchronous requests at the default tier waiting per model, beyond which one is answered 429",
    }),
    flexQueueMax: setting({
      env: "FLEX_QUEUE_MAX",
      yaml: "lanes.flex_queue_max",
      default: 256,
      schema: int(0),
      help: "synchronous requests at the flex tier waiting per model, beyond which one is answered 429 (OpenAI's resource_unavailable)",
    }),
  },
  pools: {
    spot: {
      capacity: setting({
        env: "SPOT_CAPACITY",
        yaml: "pools.spot.capacity",
        default: 2,
        schema: int(0),
        help: "the simulated spot pool's slots",
      }),
      preemptCooldownSeconds: setting({
        env: "SPOT_PREEMPT_COOLDOWN_SECONDS",
        yaml: "pools.spot.preempt_cooldown_seconds",
        default: 60,
        schema: int(0),
        help: "after a simulated preemption, how long the spot slots stay gone",
      }),
      preemptionsPerHour: setting({
        env: "SPOT_PREEMPTIONS_PER_HOUR",
        yaml: "pools.spot.preemptions_per_hour",
        default: 0,
        schema: z.coerce
          .number({ error: "must be a number >= 0" })
          .min(0, { error: "must be a number >= 0" })
          .max(36_000, { error: "must be at most 36000" }),
        help: "simulated spot reclaims at random, this many an hour on average",
      }),
    },
    dedicated: {
      capacity: setting({
        env: "DEDICATED_CAPACITY",
        yaml: "pools.dedicated.capacity",
        default: 1,
        schema: int(0),
        help: "the simulated dedicated pool's slots",
      }),
    },
  },
  slaUrgentSeconds: setting({
    env: "SLA_URGENT_SECONDS",
    yaml: "sla.urgent_seconds",
    default: 600,
    schema: int(0),
    help: "a job with less time than this to its deadline is urgent",
  }),
  slaYield: setting({
    env: "SLA_YIELD",
    yaml: "sla.yield",
    default: true,
    schema: bool(),
    read: booleanSetting,
    help: "an urgent batch waiting with every slot taken makes a less urgent running shard yield (spot first)",
  }),
  cluster: {
    databaseUrl: setting({
      env: "DATABASE_URL",
      default: "",
      schema: z.string(),
      help: "postgres://...: the distributed mode (none: the embedded mode, one process)",
    }),
    migrate: setting({
      env: "MIGRATE",
      default: true,
      schema: bool(),
      read: booleanSetting,
      distributedOnly: true,
      help: "apply the schema's migrations at start (false: a migration job does, `--migrate`)",
    }),
    role: setting({
      env: "ROLE",
      default: "all",
      schema: z.enum(["api", "worker", "all"], { error: "must be api, worker or all" }),
      help: "api, worker or all (needs DATABASE_URL unless all)",
    }),
    shardSize: setting({ env: "SHARD_SIZE", default: 1000, schema: int(1), distributedOnly: true, help: "lines per shard" }),
    checkpointSeconds: setting({
      env: "CHECKPOINT_SECONDS",
      default: 10,
      schema: int(1),
      distributedOnly: true,
      help: "how often a worker commits its shard's finished lines",
    }),
    leaseSeconds: setting({
      env: "LEASE_SECONDS",
      default: 30,
      schema: int(3),
      distributedOnly: true,
      help: "how long a silent worker keeps its shards",
    }),
    workerPool: setting({
      env: "WORKER_POOL",
      default: "dedicated",
      schema: z.enum(["spot", "dedicated"], { error: "must be spot or dedicated" }),
      distributedOnly: true,
      help: "a worker's pool",
    }),
    workerRetentionSeconds: setting({
      env: "WORKER_RETENTION_SECONDS",
      default: 86_400,
      schema: int(60),
      distributedOnly: true,
      help: "how long a worker not heard from keeps its row (then the maintenance forgets it)",
    }),
    unservedGraceSeconds: setting({
      env: "UNSERVED_GRACE_SECONDS",
      default: 300,
      schema: int(0),
      distributedOnly: true,
      help: "how long a waiting batch's lines of a model no live worker serves wait for one before they fail (model_not_found)",
    }),
    workerCapacity: setting({
      env: "WORKER_CAPACITY",
      default: 2,
      schema: int(1),
      distributedOnly: true,
      help: "a worker's shards at once",
    }),
    workerId: setting({
      env: "WORKER_ID",
      default: "",
      schema: z.string(),
      distributedOnly: true,
      help: "a worker's name (default host-pid)",
    }),
    workerUrl: setting({
      env: "WORKER_URL",
      default: "",
      schema: z.union([z.literal(""), z.url({ protocol: /^https?$/, error: "must be an http(s) URL such as http://10.0.0.7:8000" })]),
      distributedOnly: true,
      help: "where API servers send this worker synchronous requests for its models (default: http://HOST:PORT as it listens, or this machine's first network address where HOST is 0.0.0.0)",
    }),
  },
  s3: {
    endpoint: setting({ env: "S3_ENDPOINT", default: "", schema: z.string(), help: "an S3-compatible server (none: AWS)" }),
    bucket: setting({ env: "S3_BUCKET", default: "", schema: z.string(), help: "the bucket (none: BATCH_DIR as a shared folder)" }),
    region: setting({ env: "S3_REGION", default: "us-east-1", schema: z.string().min(1), help: "the bucket's region" }),
    prefix: setting({ env: "S3_PREFIX", default: "", schema: z.string(), help: "a key prefix inside the bucket" }),
    accessKeyId: setting({
      env: "S3_ACCESS_KEY_ID",
      default: "",
      schema: z.string(),
      help: "with S3_SECRET_ACCESS_KEY (none: the SDK's defaults)",
    }),
    secretAccessKey: setting({ env: "S3_SECRET_ACCESS_KEY", default: "", schema: z.string(), help: "with S3_ACCESS_KEY_ID" }),
    forcePathStyle: setting({
      env: "S3_FORCE_PATH_STYLE",
      default: true,
      schema: bool(),
      read: booleanSetting,
      help: "path-style bucket addressing (most S3-compatible servers want it)",
    }),
  },
  webhooks: {
    url: setting({
      env: "WEBHOOK_URL",
      default: "",
      schema: z.string(),
      help: "where batch.completed/failed/expired/cancelled events are POSTed, signed (Standard Webhooks)",
    }),
    secret: setting({
      env: "WEBHOOK_SECRET",
      default: "",
      schema: z.string(),
      help: "whsec_<base64>: the signing secret WEBHOOK_URL's receiver verifies with",
    }),
    byKey: setting({
      env: "WEBHOOKS_BY_KEY",
      default: "",
      schema: z.string(),
      help: 'JSON {"<api key>": {"url": ..., "secret": "whsec_..."}}: an API key\'s own endpoint for its batches',
    }),
    retrySeconds: setting({
      env: "WEBHOOK_RETRY_SECONDS",
      default: 72 * 3600,
      schema: int(1),
      help: "how long a failing delivery is retried (with backoff) before it is given up",
    }),
  },
  datasets: {
    reads: setting({
      env: "DATASET_READS",
      default: 2,
      schema: int(1),
      help: "dataset reads (a create from a dataset, a table's download) running at once in a process; four times as many wait, more are answered 429",
    }),
    scratchMb: setting({
      env: "DATASET_SCRATCH_MB",
      default: 0,
      schema: int(0),
      help: "the most one dataset read may spill to disk, a costly where stopped past it (0: a twentieth of the free space on BATCH_DIR's disk as it starts)",
    }),
    readMemoryMb: setting({
      env: "DATASET_READ_MEMORY_MB",
      default: 0,
      schema: int(0).refine((mb) => mb === 0 || mb >= 256, { error: "must be 0 (the default share) or at least 256" }),
      help: "the most memory one dataset read may take: each runs in a process of its own, stopped past it with a 400 (0: the DATASET_READS reads share half the memory the service may use, 256 to 4096 each)",
    }),
    stepSeconds: setting({
      env: "DATASET_STEP_SECONDS",
      default: 60,
      schema: int(1),
      help: "the longest one step of a dataset read (a statement, the next chunk of rows) may take; one DuckDB cannot interrupt (one call on one huge value) has its process killed",
    }),
  },
  resultCache: {
    enabled: setting({
      env: "RESULT_CACHE",
      default: true,
      schema: bool(),
      read: booleanSetting,
      help: "answer a deterministic request (greedy, seeded, embeddings, rerank, score) once: repeats in flight share it, and answers are remembered for the key's later requests (off: every request computes; docs/cache.md)",
    }),
    maxBytes: setting({
      env: "RESULT_CACHE_MAX_BYTES",
      default: 0,
      schema: bytes(0),
      help: "the bytes remembered answers may hold together (or with a unit: 10GB, 10GiB), the least recently used evicted past it (0: a twentieth of the size of BATCH_DIR's disk, at most 20 GiB)",
    }),
    ttlSeconds: setting({
      env: "RESULT_CACHE_TTL",
      default: 30 * 86_400,
      schema: int(0),
      help: "seconds a remembered answer is served after it was computed (0: until evicted)",
    }),
  },
  http: {
    headersTimeoutSeconds: setting({
      env: "HTTP_HEADERS_TIMEOUT_SECONDS",
      default: 20,
      schema: int(1),
      help: "a client must send its headers within this (408 otherwise)",
    }),
    requestTimeoutSeconds: setting({
      env: "HTTP_REQUEST_TIMEOUT_SECONDS",
      default: 900,
      schema: int(1),
      help: "a client must send its whole request, an upload included, within this",
    }),
    idleTimeoutSeconds: setting({
      env: "HTTP_IDLE_TIMEOUT_SECONDS",
      default: 120,
      schema: int(1),
      help: "a socket with no traffic for this long is closed",
    }),
    keepAliveSeconds: setting({
      env: "HTTP_KEEP_ALIVE_SECONDS",
      default: 75,
      schema: int(1),
      help: "an answered connection waits this long for its next request (longer than clients and proxies keep theirs)",
    }),
    maxConnections: setting({
      env: "MAX_CONNECTIONS",
      default: 0,
      schema: int(0),
      help: "connections held at once (0: half the process's descriptor limit)",
    }),
  },
} satisfies SettingsTree;

/** The settings, and the keys they declare (API_KEYS and KEYS_FILE, read and checked once at start). */
export type Config = ConfigOf<typeof SETTINGS> & { keys: readonly ApiKey[] };

/** Each setting with its place in the tree, in declaration order. */
export function eachSetting(tree: SettingsTree = SETTINGS, at: string[] = []): Array<{ path: string[]; setting: Setting }> {
  return Object.entries(tree).flatMap(([key, node]) =>
    isSetting(node) ? [{ path: [...at, key], setting: node }] : eachSetting(node, [...at, key]),
  );
}

/** The zod schema of the whole tree. */
export function schemaOf(tree: SettingsTree): z.ZodObject {
  return z.object(Object.fromEntries(Object.entries(tree).map(([k, node]) => [k, isSetting(node) ? node.schema : schemaOf(node)])));
}

/** `npm start -- --help`: each variable with its default and what it does. */
export function settingsHelp(): string {
  const rows = eachSetting().map(({ setting: s }) => {
    const shown = s.default === "" ? "(none)" : String(s.default);
    return `  ${s.env.padEnd(30)} ${shown.padEnd(10)} ${s.help}`;
  });
  return [
    "offline-batch-inference: settings come from the environment, else MODEL_CONFIG's YAML (config/model_config.yaml).",
    "",
    `  ${"VARIABLE".padEnd(30)} ${"DEFAULT".padEnd(10)} WHAT IT DOES`,
    ...rows,
    `  ${"MODEL_CONFIG".padEnd(30)} ${"(above)".padEnd(10)} another YAML file of defaults`,
  ].join("\n");
}

/**
 * Every setting as a Markdown table (docs/configuration.md holds it between its `settings` markers, written by
 * `npm run docs:config`; a test keeps the two equal, so the page cannot drift from this file).
 */
export function settingsTable(): string {
  const cell = (t: string) => t.replaceAll("|", "\\|").replaceAll("<", "&lt;");
  const shown = (v: unknown) => (v === "" ? "*(none)*" : `\`${String(v)}\``);
  const rows = eachSetting().map(
    ({ setting: s }) => `| \`${s.env}\` | ${s.yaml ? `\`${s.yaml}\`` : ""} | ${shown(s.default)} | ${cell(s.help)} |`,
  );
  return ["| variable | YAML key | default | what it does |", "|---|---|---|---|", ...rows].join("\n");
}
