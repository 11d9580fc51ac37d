// The settings read from the environment and the models file, validated at start (settings.ts declares them).
import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import YAML from "yaml";
import { misspeltEnvNames } from "./env-names.js";
import { type ApiKey, loadKeys, ownerOfSecret } from "./keys.js";
import { nearestKey, unknownKey } from "./known-keys.js";
import { isRemoteModel, parseModelRef } from "./model-ref.js";
import { type Config, eachSetting, SETTINGS, schemaOf } from "./settings.js";

export type { Config };

const here = path.dirname(fileURLToPath(import.meta.url));
export const DEFAULT_MODEL_CONFIG = path.resolve(here, "./model_config.yaml");

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

type Env = Record<string, string | undefined>;

const CONFIG_SCHEMA = schemaOf(SETTINGS);

const at = (obj: any, keys: readonly string[]): unknown => keys.reduce((o, k) => (o == null ? undefined : o[k]), obj);

function setAt(obj: Record<string, any>, keys: readonly string[], value: unknown): void {
  let o = obj;
  for (const k of keys.slice(0, -1)) o = o[k] ??= {};
  o[keys[keys.length - 1]] = value;
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
  checkEnvNames(env);
  const unknown = unknownYamlKeys(y);
  if (unknown.length > 0) throw new ConfigError(`invalid configuration: ${file}: ${unknown.join("; ")}`);
  const raw: Record<string, any> = {};
  /** Where each setting the user gave came from, by its place in the tree ("engine.threads"), for errors. */
  const given = new Map<string, string>();
  const settings = eachSetting();
  for (const { path: keys, setting: s } of settings) {
    const fromEnv = env[s.env];
    const fromYaml = s.yaml ? at(y, s.yaml.split(".")) : undefined;
    if (fromEnv !== undefined) given.set(keys.join("."), `${s.env}=${fromEnv}`);
    else if (fromYaml !== undefined) given.set(keys.join("."), `${s.yaml}: ${JSON.stringify(fromYaml)} in ${file}`);
    const value = fromEnv ?? fromYaml ?? s.default;
    setAt(raw, keys, s.read ? s.read(value) : value);
  }
  const parsed = CONFIG_SCHEMA.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => {
      const where = i.path.join(".");
      const setting = settings.find((s) => s.path.join(".") === where)?.setting;
      return `${given.get(where) ?? setting?.env ?? where}: ${i.message}`;
    });
    throw new ConfigError(`invalid configuration: ${issues.join("; ")}`);
  }
  // The schema is the tree's, so what it parsed has the tree's shape.
  const cfg = parsed.data as Config;
  if (cfg.pools.spot.capacity + cfg.pools.dedicated.capacity < 1) {
    throw new ConfigError("invalid configuration: pools: spot and dedicated capacity are both 0, no job could ever run");
  }
  checkCluster(cfg, given);
  if (cfg.modelsFile && cfg.modelPath) {
    throw new ConfigError("invalid configuration: MODELS_FILE and MODEL_PATH are both set; name the model in the models file instead");
  }
  if (cfg.modelPath) checkModelRef("MODEL_PATH", cfg.modelPath);
  let keys: ApiKey[];
  try {
    keys = loadKeys(cfg.apiKeys, cfg.keysFile ? path.resolve(cfg.keysFile) : "");
  } catch (err) {
    throw new ConfigError(`invalid configuration: ${(err as Error).message}`);
  }
  webhookEndpoints({ ...cfg, keys });
  // Keys asked for but none given: a deployment meant a closed API, so HOST away from loopback does not open it.
  const asked = cfg.keysFile ? `KEYS_FILE ${cfg.keysFile}` : env.API_KEYS?.trim() ? "API_KEYS" : "";
  if (asked && keys.length === 0 && cfg.host && !isLoopbackHost(cfg.host))
    throw new ConfigError(
      `invalid configuration: ${asked} holds no key, so the API would be open to whoever reaches HOST=${cfg.host}; add a key (npm run keys -- new <id>) or listen on 127.0.0.1`,
    );
  if (cfg.requireApiKeys && keys.length === 0) {
    throw new ConfigError(
      "invalid configuration: REQUIRE_API_KEYS=true and neither API_KEYS nor KEYS_FILE gives a key (the API must not be open)",
    );
  }
  return {
    ...cfg,
    keys,
    // An API without keys is open to whoever reaches it: only loopback, unless HOST says otherwise.
    host: cfg.host || (keys.length > 0 ? "0.0.0.0" : "127.0.0.1"),
    batchDir: path.resolve(cfg.batchDir),
    modelPath: cfg.modelPath ? modelPathOf(cfg.modelPath) : "",
    modelsDir: path.resolve(cfg.modelsDir),
    modelsFile: cfg.modelsFile ? path.resolve(cfg.modelsFile) : "",
  };
}

/**
 * A variable spelt like a setting but none (KEY_FILE, MAX_QUEUE_DEPHT) is refused, naming the setting meant: ignored,
 * it would leave the default in force, and for the keys an API open on whatever HOST says.
 */
function checkEnvNames(env: Env): void {
  const settings = eachSetting().map(({ setting }) => setting);
  const names = {
    settings: settings.map((s) => s.env),
    yaml: settings.flatMap((s) => (s.yaml ? [{ key: s.yaml, env: s.env }] : [])),
  };
  const allowed = String(env.ENV_NOT_SETTINGS ?? "")
    .split(",")
    .map((n) => n.trim())
    .filter(Boolean);
  const problems = misspeltEnvNames(env, names, allowed);
  if (problems.length > 0)
    throw new ConfigError(`invalid configuration: ${problems.join("; ")} (a variable meant for another program goes in ENV_NOT_SETTINGS)`);
}

export const isLoopbackHost = (host: string) => host === "localhost" || host === "::1" || host.startsWith("127.");

/** A file is made absolute (against the working folder); a download's reference is kept as written. */
const modelPathOf = (p: string) => (isRemoteModel(p) ? p.trim() : path.resolve(p));

/** One line naming the setting when what it names is neither a file nor a reference this service can download. */
export function checkModelRef(name: string, value: string): void {
  try {
    parseModelRef(value);
  } catch (err) {
    throw new ConfigError(`invalid configuration: ${name}=${value}: ${(err as Error).message}`);
  }
}

/**
 * The keys of the models config's YAML that no setting declares, each named with the nearest declared one (a key of
 * the same section, else a setting of that name in another: `threads` at the top is `engine.threads`).
 */
export function unknownYamlKeys(doc: unknown): string[] {
  const declared = eachSetting().flatMap(({ setting }) => (setting.yaml ? [setting.yaml] : []));
  const problems: string[] = [];
  const walk = (node: unknown, at: string) => {
    if (node === null || typeof node !== "object" || Array.isArray(node)) {
      problems.push(`${at || "the file"}: must be a map of settings (${childKeys(declared, at).join(", ")})`);
      return;
    }
    for (const [key, value] of Object.entries(node)) {
      const where = at ? `${at}.${key}` : key;
      if (declared.includes(where)) continue;
      if (declared.some((d) => d.startsWith(`${where}.`))) walk(value, where);
      else {
        const sibling = nearestKey(key, childKeys(declared, at));
        const elsewhere = declared.find((d) => nearestKey(key, [d.split(".").at(-1)!]) !== undefined);
        const near = sibling ? (at ? `${at}.${sibling}` : sibling) : elsewhere;
        problems.push(`unknown key '${where}' (${near ? `did you mean '${near}'?` : `valid keys: ${childKeys(declared, at).join(", ")}`})`);
      }
    }
  };
  walk(doc, "");
  return problems;
}

/** The keys declared directly under `at` ("" for the top). */
function childKeys(declared: readonly string[], at: string): string[] {
  const prefix = at ? `${at}.` : "";
  return [...new Set(declared.filter((d) => d.startsWith(prefix)).map((d) => d.slice(prefix.length).split(".")[0]))];
}

/** Shared state needs its database; a role other than `all`, S3 storage and the shard settings only make sense with one. */
function checkCluster(cfg: Config, given: Map<string, string>): void {
  const { cluster, s3 } = cfg;
  const fail = (why: string) => {
    throw new ConfigError(`invalid configuration: ${why}`);
  };
  if (!cluster.databaseUrl) {
    if (cluster.role !== "all") fail(`ROLE=${cluster.role} needs DATABASE_URL: without it the service is one process that does everything`);
    if (s3.bucket || s3.endpoint) fail("S3_BUCKET/S3_ENDPOINT need DATABASE_URL: shared storage is used only in the distributed mode");
    const set = eachSetting()
      .filter(({ path: keys, setting }) => setting.distributedOnly && given.has(keys.join(".")))
      .map(({ path: keys }) => given.get(keys.join(".")));
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

export interface WebhookEndpoint {
  url: string;
  /** WEBHOOK_SECRET's key bytes (the base64 after `whsec_`). */
  key: Buffer;
}

/** A Standard Webhooks secret: `whsec_` and the base64 of 24 to 64 random bytes. */
function webhookKey(secret: string, name: string): Buffer {
  const m = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(secret);
  const key = m ? Buffer.from(m[1], "base64") : undefined;
  if (!key || key.length < 24 || key.length > 64)
    throw new ConfigError(
      `invalid configuration: ${name}: must be whsec_ and the base64 of 24 to 64 random bytes (openssl rand -base64 32)`,
    );
  return key;
}

function webhookUrl(url: string, name: string): string {
  let u: URL | undefined;
  try {
    u = new URL(url);
  } catch {}
  if (!u || (u.protocol !== "http:" && u.protocol !== "https:"))
    throw new ConfigError(`invalid configuration: ${name}: must be an http(s) URL`);
  return url;
}

/**
 * The webhook endpoints the settings name: the deployment's (WEBHOOK_URL, WEBHOOK_SECRET), and each API key's
 * (WEBHOOKS_BY_KEY). Throws one ConfigError naming the setting at fault; loadConfig calls it once at start.
 */
export function webhookEndpoints(cfg: Pick<Config, "webhooks" | "apiKeys" | "keys">): {
  deployment?: WebhookEndpoint;
  /** By owner (domain/owner.ts): WEBHOOKS_BY_KEY's keys and the keys file's. */
  byOwner: Map<string, WebhookEndpoint>;
} {
  const { url, secret, byKey } = cfg.webhooks;
  if (Boolean(url) !== Boolean(secret))
    throw new ConfigError("invalid configuration: WEBHOOK_URL and WEBHOOK_SECRET go together: set both, or neither");
  const deployment = url ? { url: webhookUrl(url, "WEBHOOK_URL"), key: webhookKey(secret, "WEBHOOK_SECRET") } : undefined;
  const keyed = new Map<string, WebhookEndpoint>();
  if (byKey) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(byKey);
    } catch {
      throw new ConfigError('invalid configuration: WEBHOOKS_BY_KEY: must be JSON, {"<api key>": {"url": ..., "secret": "whsec_..."}}');
    }
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed))
      throw new ConfigError('invalid configuration: WEBHOOKS_BY_KEY: must be a JSON object, {"<api key>": {"url": ..., "secret": ...}}');
    for (const [apiKey, v] of Object.entries(parsed)) {
      if (!cfg.apiKeys.includes(apiKey))
        throw new ConfigError("invalid configuration: WEBHOOKS_BY_KEY: names a key that is not in API_KEYS");
      const e = v as { url?: unknown; secret?: unknown } | null;
      if (typeof e?.url !== "string" || typeof e?.secret !== "string")
        throw new ConfigError("invalid configuration: WEBHOOKS_BY_KEY: each key needs a url and a secret");
      const extra = Object.keys(e).find((k) => k !== "url" && k !== "secret");
      if (extra) throw new ConfigError(`invalid configuration: WEBHOOKS_BY_KEY: ${unknownKey(extra, ["url", "secret"])}`);
      const owner = ownerOfSecret(apiKey);
      keyed.set(owner, { url: webhookUrl(e.url, "WEBHOOKS_BY_KEY url"), key: webhookKey(e.secret, "WEBHOOKS_BY_KEY secret") });
    }
  }
  for (const k of cfg.keys) {
    if (!k.webhook) continue;
    const where = `KEYS_FILE: key ${k.id}: webhook`;
    keyed.set(k.owner, { url: webhookUrl(k.webhook.url, `${where}.url`), key: webhookKey(k.webhook.secret, `${where}.secret`) });
  }
  return { deployment, byOwner: keyed };
}

/**
/**
 * What can be checked on disk before the model loads: BATCH_DIR and MODELS_DIR must be folders (or not exist yet)
 * and MODEL_PATH, when it names a file, a file, except on an API server, which loads no model (the name of the file
 * names the workers' model: one ConfigMap sets it for every pod). Throws one ConfigError naming the setting, or
 * `modelSetting` where the model came from elsewhere (the runner's --model).
 */
export function checkPaths(
  config: Pick<Config, "batchDir" | "modelPath" | "modelsDir"> & { cluster?: Pick<Config["cluster"], "role"> },
  modelSetting = "MODEL_PATH",
): void {
  const kind = (p: string) => {
    try {
      return statSync(p).isDirectory() ? "folder" : "file";
    } catch {
      return "missing";
    }
  };
  if (kind(config.batchDir) === "file")
    throw new ConfigError(`BATCH_DIR=${config.batchDir}: is a file; it must be a folder (or not exist yet)`);
  if (kind(config.modelsDir) === "file")
    throw new ConfigError(`MODELS_DIR=${config.modelsDir}: is a file; it must be a folder (or not exist yet)`);
  // A download's reference is fetched (and checked) when the models are brought up.
  if (config.modelPath && !isRemoteModel(config.modelPath) && config.cluster?.role !== "api") {
    const k = kind(config.modelPath);
    if (k !== "file") {
      // owner/repo, as Hugging Face names a repository, was most likely meant as one.
      const repo = /^[\w.-]+\/[\w.-]+$/.exec(path.relative(process.cwd(), config.modelPath));
      const hint = k === "missing" && repo && !/\.gguf$/i.test(repo[0]) ? ` (for the Hugging Face repository, write hf:${repo[0]})` : "";
      const named = modelSetting.startsWith("--") ? `${modelSetting} ${config.modelPath}` : `${modelSetting}=${config.modelPath}`;
      throw new ConfigError(`${named}: ${k === "missing" ? "no such file" : "is a folder"}; it must be a .gguf file${hint}`);
    }
  }
}
