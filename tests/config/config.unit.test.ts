// Configuration is read and validated once, failing with one message that names the setting.
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import YAML from "yaml";
import { ConfigError, checkPaths, DEFAULT_MODEL_CONFIG as DEFAULT_CONFIG, loadConfig } from "../../config/config.js";
import { eachSetting, settingsHelp, settingsTable } from "../../config/settings.js";
import { readDocTable } from "../../testkit/doc-tables.js";
import { repoRoot } from "../../testkit/repo-root.js";
import { tempDir } from "../helpers/scratch.js";

/** The folder of the settings files and paths these tests write, removed after them. */
const dir = tempDir("obi-config");

describe("loadConfig", () => {
  it("defaults REPRODUCIBLE to false and reads true/false words", () => {
    expect(loadConfig({}).engine.reproducible).toBe(false);
    for (const v of ["true", "1", "yes", "ON"]) expect(loadConfig({ REPRODUCIBLE: v }).engine.reproducible, v).toBe(true);
    for (const v of ["false", "0", "no", "off"]) expect(loadConfig({ REPRODUCIBLE: v }).engine.reproducible, v).toBe(false);
  });

  it("reads FLASH_ATTENTION as auto (the default), or on and off as true/false words, and refuses anything else", () => {
    expect(loadConfig({}).engine.flashAttention).toBe("auto");
    expect(loadConfig({ FLASH_ATTENTION: " Auto " }).engine.flashAttention).toBe("auto");
    expect(loadConfig({ FLASH_ATTENTION: "on" }).engine.flashAttention).toBe(true);
    expect(loadConfig({ FLASH_ATTENTION: "false" }).engine.flashAttention).toBe(false);
    expect(() => loadConfig({ FLASH_ATTENTION: "fast" })).toThrow("FLASH_ATTENTION=fast: must be auto, true or false (or on/off");
    // Set to nothing (`FLASH_ATTENTION: ${FA}` with FA unset): the default, not off.
    expect(loadConfig({ FLASH_ATTENTION: "" }).engine.flashAttention).toBe("auto");
    expect(loadConfig({ KV_UNIFIED: " " }).engine.kvUnified).toBe("auto");
  });

  it("refuses a YAML list or map where a true/false or auto setting belongs, though its text would read as one", () => {
    const file = path.join(dir, "lists.yaml");
    for (const [yaml, message] of [
      ["engine:\n  flash_attention: [true]\n", "engine.flash_attention: [true]"],
      ["engine:\n  kv_unified: [[auto]]\n", 'engine.kv_unified: [["auto"]]'],
      ["engine:\n  prefix_copy: [false]\n", "engine.prefix_copy: [false]"],
    ]) {
      writeFileSync(file, yaml);
      expect(() => loadConfig({ MODEL_CONFIG: file }), yaml).toThrow(message);
    }
  });

  it("listens on loopback while the API has no keys, on every interface with keys, and where HOST says in either case", () => {
    expect(loadConfig({}).host).toBe("127.0.0.1");
    expect(loadConfig({ API_KEYS: "k1" }).host).toBe("0.0.0.0");
    expect(loadConfig({ HOST: "0.0.0.0" }).host).toBe("0.0.0.0");
    expect(loadConfig({ API_KEYS: "k1", HOST: "127.0.0.1" }).host).toBe("127.0.0.1");
  });

  describe("a variable of the environment spelt like a setting but none", () => {
    const refusal = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (err) {
        return (err as Error).message;
      }
      return "started";
    };
    const SUFFIX = " (a variable meant for another program goes in ENV_NOT_SETTINGS)";

    it("refuses the start, naming each one and the setting meant (the keys misspelt never leave the API open)", () => {
      expect(
        refusal({
          HOST: "0.0.0.0",
          KEY_FILE: "/tmp/keys.yaml",
          API_KEY: "sk-x",
          MODEL_PTH: "m.gguf",
          MAX_QUEUE_DEPHT: "5",
          ENGINE_THREDS: "1",
        }),
      ).toBe(
        "invalid configuration: KEY_FILE is not a setting (did you mean KEYS_FILE?); API_KEY is not a setting (did you mean API_KEYS?); " +
          "MODEL_PTH is not a setting (did you mean MODEL_PATH?); MAX_QUEUE_DEPHT is not a setting (did you mean MAX_QUEUE_DEPTH?); " +
          `ENGINE_THREDS is not a setting (did you mean THREADS?)${SUFFIX}`,
      );
      expect(refusal({ keys_file: "/tmp/keys.yaml" })).toBe(
        `invalid configuration: keys_file is not a setting (did you mean KEYS_FILE?)${SUFFIX}`,
      );
      expect(refusal({ ENGINE_THREADS: "2" })).toBe(
        `invalid configuration: ENGINE_THREADS is not a setting (did you mean THREADS?)${SUFFIX}`,
      );
      expect(refusal({ HOSTT: "0.0.0.0" })).toBe(`invalid configuration: HOSTT is not a setting (did you mean HOST?)${SUFFIX}`);
      // The variables read besides the settings are named too.
      expect(refusal({ MODEL_CONFG: "x.yaml" })).toBe(
        `invalid configuration: MODEL_CONFG is not a setting (did you mean MODEL_CONFIG?)${SUFFIX}`,
      );
    });

    it("refuses a variable with a prefix settings share that names none of them, listing them", () => {
      expect(refusal({ DATASET_X: "1" })).toBe(
        "invalid configuration: DATASET_X is not a setting (the DATASET_ settings are DATASET_READS, DATASET_SCRATCH_MB, " +
          `DATASET_READ_MEMORY_MB, DATASET_STEP_SECONDS)${SUFFIX}`,
      );
    });

    it("leaves alone the system's variables, Kubernetes' service links, npm's, HF_ and HTTP_ ones, and what ENV_NOT_SETTINGS lists", () => {
      const env = {
        HOME: "/root",
        PGPORT: "5432",
        HOSTNAME: "pod-1",
        npm_config_cache: "/tmp",
        HF_HOME: "/hf",
        HTTP_PROXY: "http://proxy:3128",
        WORKER_PORT: "tcp://10.0.0.2:8000",
        WORKER_SERVICE_HOST: "10.0.0.2",
        WORKER_PORT_8000_TCP_ADDR: "10.0.0.2",
        MODEL_CONFIG: DEFAULT_CONFIG,
        LOG_FORMAT: "json",
      };
      expect(refusal(env)).toBe("started");
      expect(refusal({ MAX_MEMORY: "1g", ENV_NOT_SETTINGS: "MAX_MEMORY" })).toBe("started");
      expect(refusal({ MAX_MEMORY: "1g", ENV_NOT_SETTING: "MAX_MEMORY" })).toMatch(
        /ENV_NOT_SETTING is not a setting \(did you mean ENV_NOT_SETTINGS\?\)/,
      );
    });
  });

  it("refuses to start open when REQUIRE_API_KEYS is set (a deployment whose secret lacks the keys)", () => {
    expect(() => loadConfig({ REQUIRE_API_KEYS: "true" })).toThrow(/REQUIRE_API_KEYS=true and neither API_KEYS nor KEYS_FILE gives a key/);
    expect(() => loadConfig({ REQUIRE_API_KEYS: "true", API_KEYS: " , " })).toThrow(ConfigError);
    expect(loadConfig({ REQUIRE_API_KEYS: "true", API_KEYS: "k1" }).apiKeys).toEqual(["k1"]);
    expect(loadConfig({}).shutdownDrainSeconds).toBe(5);
  });

  it("reads CORS_ORIGINS as origins the way a browser writes them, and refuses what is not one, naming it", () => {
    expect(loadConfig({}).corsOrigins).toEqual([]);
    expect(loadConfig({ CORS_ORIGINS: " https://App.Example.com/ , http://localhost:3000,https://x.example:443" }).corsOrigins).toEqual([
      "https://app.example.com",
      "http://localhost:3000",
      "https://x.example",
    ]);
    for (const bad of ["*", "app.example.com", "https://app.example.com/console", "ftp://x.example", "https://*.example.com", "null"])
      expect(() => loadConfig({ CORS_ORIGINS: `https://ok.example,${bad}` }), bad).toThrow(
        new RegExp(`CORS_ORIGINS=.*'${bad.replace(/[.*/]/g, "\\$&")}' is not an origin`),
      );
  });

  it("reads the scheduling switches: BATCH_ORDER cost (default), interleave or file, PREFIX_COPY on by default", () => {
    expect(loadConfig({}).pipeline.order).toBe("cost");
    expect(loadConfig({ BATCH_ORDER: "file" }).pipeline.order).toBe("file");
    expect(loadConfig({ BATCH_ORDER: "interleave" }).pipeline.order).toBe("interleave");
    expect(() => loadConfig({ BATCH_ORDER: "random" })).toThrow(
      "invalid configuration: BATCH_ORDER=random: must be cost, interleave or file",
    );
    expect(loadConfig({}).engine.prefixCopy).toBe(true);
    expect(loadConfig({ PREFIX_COPY: "off" }).engine.prefixCopy).toBe(false);
    expect(() => loadConfig({ PREFIX_COPY: "sometimes" })).toThrow("PREFIX_COPY=sometimes: must be true or false");
  });

  it("refuses a value it cannot read, naming the setting", () => {
    expect(() => loadConfig({ REPRODUCIBLE: "maybe" })).toThrow(ConfigError);
    expect(() => loadConfig({ REPRODUCIBLE: "maybe" })).toThrow("invalid configuration: REPRODUCIBLE=maybe: must be true or false");
    expect(() => loadConfig({ THREADS: "abc" })).toThrow("invalid configuration: THREADS=abc: must be a whole number >= 0");
    expect(() => loadConfig({ SEQUENCES: "-2" })).toThrow("SEQUENCES=-2: must be a whole number >= 0");
    expect(() => loadConfig({ PORT: "70000" })).toThrow("PORT=70000: must be a port number, 0 to 65535");
    expect(() => loadConfig({ GPU: "metal" })).toThrow("GPU=metal: must be auto, cuda, vulkan or false");
    expect(() => loadConfig({ LOG_LEVEL: "loud" })).toThrow("LOG_LEVEL=loud: must be one of");
    expect(() => loadConfig({ DATASET_READ_MEMORY_MB: "100" })).toThrow(
      "invalid configuration: DATASET_READ_MEMORY_MB=100: must be 0 (the default share) or at least 256",
    );
    expect(() => loadConfig({ DATASET_STEP_SECONDS: "0" })).toThrow("DATASET_STEP_SECONDS=0: must be a whole number >= 1");
    expect(loadConfig({ DATASET_READ_MEMORY_MB: "768", DATASET_STEP_SECONDS: "5" }).datasets).toMatchObject({
      readMemoryMb: 768,
      stepSeconds: 5,
    });
  });

  // Number() reads "" as 0, so `PORT=` in an env file listened on a random port, and took hex, exponents and signs.
  it.each([
    ["PORT", ""],
    ["PORT", "0x1F40"],
    ["THREADS", "1e1"],
    ["SPOT_CAPACITY", "+2"],
  ])("refuses %s=%j: a whole number is decimal digits", (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(`invalid configuration: ${name}=${value}: must be a whole number >= `);
  });

  it("reads a byte size as a whole number or with a unit, decimal or binary, and names both forms when it cannot", () => {
    expect(loadConfig({ RESULT_CACHE_MAX_BYTES: "10GB" }).resultCache.maxBytes).toBe(10e9);
    expect(loadConfig({ RESULT_CACHE_MAX_BYTES: "10 GiB" }).resultCache.maxBytes).toBe(10 * 2 ** 30);
    expect(loadConfig({ MAX_FILE_BYTES: "1.5mb" }).maxFileBytes).toBe(1_500_000);
    expect(loadConfig({ MAX_LINE_BYTES: " 4096 " }).maxLineBytes).toBe(4096);
    for (const value of ["1_000", "10 gigs", "-1GB", "0x10", ""])
      expect(() => loadConfig({ MAX_FILE_BYTES: value })).toThrow(
        `invalid configuration: MAX_FILE_BYTES=${value}: must be a whole number of bytes >= 1, or a size such as 512MB or 10GiB`,
      );
  });

  it("reads whole numbers from decimal digits, spaces around them allowed, and from YAML numbers", () => {
    expect(loadConfig({ PORT: " 8080 " }).port).toBe(8080);
    expect(loadConfig({ PORT: "0" }).port).toBe(0);
    expect(() => loadConfig({ PORT: "65536" })).toThrow("PORT=65536: must be a port number, 0 to 65535");
  });

  it("reads the distributed mode's settings and refuses combinations that cannot work", () => {
    const c = loadConfig({
      DATABASE_URL: "postgres://u@db/obi",
      ROLE: "worker",
      WORKER_POOL: "spot",
      S3_BUCKET: "b",
      S3_FORCE_PATH_STYLE: "no",
    });
    expect(c.cluster).toMatchObject({
      role: "worker",
      workerPool: "spot",
      shardSize: 1000,
      checkpointSeconds: 10,
      leaseSeconds: 30,
      workerCapacity: 2,
    });
    expect(c.s3).toMatchObject({ bucket: "b", region: "us-east-1", forcePathStyle: false });
    expect(loadConfig({}).cluster.databaseUrl).toBe("");
    expect(() => loadConfig({ ROLE: "api" })).toThrow("ROLE=api needs DATABASE_URL");
    expect(() => loadConfig({ ROLE: "boss" })).toThrow("ROLE=boss: must be api, worker or all");
    expect(() => loadConfig({ S3_BUCKET: "b" })).toThrow("S3_BUCKET/S3_ENDPOINT need DATABASE_URL");
    // Settings only the distributed mode reads are refused without it, not silently ignored.
    expect(() => loadConfig({ SHARD_SIZE: "500" })).toThrow("SHARD_SIZE=500: only the distributed mode (DATABASE_URL) uses this");
    expect(() => loadConfig({ WORKER_POOL: "spot", LEASE_SECONDS: "40" })).toThrow(
      "LEASE_SECONDS=40, WORKER_POOL=spot: only the distributed mode",
    );
    expect(() => loadConfig({ DATABASE_URL: "mysql://x" })).toThrow("DATABASE_URL: must be a postgres:// or postgresql:// URL");
    const db = { DATABASE_URL: "postgresql://u@db/obi" };
    expect(() => loadConfig({ ...db, S3_ENDPOINT: "http://s3:8333" })).toThrow("S3_ENDPOINT is set but S3_BUCKET is not");
    expect(() => loadConfig({ ...db, S3_BUCKET: "b", S3_ACCESS_KEY_ID: "k" })).toThrow(
      "S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together",
    );
    expect(() => loadConfig({ ...db, CHECKPOINT_SECONDS: "30", LEASE_SECONDS: "30" })).toThrow(
      "CHECKPOINT_SECONDS=30 must be below LEASE_SECONDS=30",
    );
    expect(() => loadConfig({ ...db, SHARD_SIZE: "0" })).toThrow("SHARD_SIZE=0: must be a whole number >= 1");
  });

  it("names the YAML key and file when the mistake is in MODEL_CONFIG", () => {
    const file = path.join(dir, "c.yaml");
    writeFileSync(file, "engine:\n  threads: many\n");
    expect(() => loadConfig({ MODEL_CONFIG: file })).toThrow(`engine.threads: "many" in ${file}: must be a whole number >= 0`);
    // The environment wins over the file, and is what the message names.
    expect(() => loadConfig({ MODEL_CONFIG: file, THREADS: "x" })).toThrow("THREADS=x:");
  });

  it("refuses a key of MODEL_CONFIG that no setting has, naming it and the nearest that does", () => {
    const refused = (yaml: string) => {
      const file = path.join(dir, "c.yaml");
      writeFileSync(file, yaml);
      try {
        loadConfig({ MODEL_CONFIG: file });
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as Error).message.replace(`${file}: `, "");
      }
      throw new Error(`accepted:\n${yaml}`);
    };
    expect(refused("engine: {thread: 2}\n")).toBe("invalid configuration: unknown key 'engine.thread' (did you mean 'engine.threads'?)");
    // A setting put in the wrong section, or spelt as its variable, is found where it belongs.
    expect(refused("threads: 2\n")).toBe("invalid configuration: unknown key 'threads' (did you mean 'engine.threads'?)");
    expect(refused("pipeline:\n  CONCURRENCY: 4\n")).toBe(
      "invalid configuration: unknown key 'pipeline.CONCURRENCY' (did you mean 'pipeline.concurrency'?)",
    );
    expect(refused("pools:\n  spot: {capacty: 1}\n")).toBe(
      "invalid configuration: unknown key 'pools.spot.capacty' (did you mean 'pools.spot.capacity'?)",
    );
    expect(refused("sla: 5\nbogus: 1\n")).toBe(
      "invalid configuration: sla: must be a map of settings (urgent_seconds, yield); " +
        "unknown key 'bogus' (valid keys: model, engine, pipeline, lanes, pools, sla)",
    );
  });
});

describe("the settings, declared once", () => {
  const settings = eachSetting();

  it("gives each setting one variable, a default the schema accepts, and help", () => {
    const envs = settings.map((s) => s.setting.env);
    expect(new Set(envs).size).toBe(envs.length);
    const defaults = loadConfig({});
    for (const { path: keys, setting } of settings) {
      expect(setting.help.length, setting.env).toBeGreaterThan(5);
      expect(
        keys.reduce((o: any, k) => o?.[k], defaults),
        setting.env,
      ).not.toBeUndefined();
    }
  });

  it("documents every variable in docs/configuration.md (the table written from settings.ts) and in --help", () => {
    const table = readDocTable("docs/configuration.md", "settings");
    expect(table, "docs/configuration.md is current: run npm run docs:config").toBe(settingsTable());
    const help = settingsHelp();
    for (const { setting } of settings) {
      expect(table).toContain(`| \`${setting.env}\` |`);
      expect(help).toContain(setting.env);
    }
  });

  it("knows every key of the shipped YAML file, and the file's keys reach their settings", () => {
    const file = YAML.parse(readFileSync(path.join(repoRoot, "config/model_config.yaml"), "utf8"));
    const leaves = (o: Record<string, unknown>, at: string[] = []): string[] =>
      Object.entries(o).flatMap(([k, v]) =>
        v && typeof v === "object" ? leaves(v as Record<string, unknown>, [...at, k]) : [[...at, k].join(".")],
      );
    const yamlKeys = new Set(settings.flatMap((s) => (s.setting.yaml ? [s.setting.yaml] : [])));
    for (const key of leaves(file)) expect(yamlKeys.has(key), key).toBe(true);
    writeFileSync(path.join(dir, "c.yaml"), "engine:\n  context_size: 2048\npools:\n  spot:\n    preempt_cooldown_seconds: 7\n");
    const c = loadConfig({ MODEL_CONFIG: path.join(dir, "c.yaml") });
    expect(c.engine.contextSize).toBe(2048);
    expect(c.pools.spot.preemptCooldownSeconds).toBe(7);
    expect(loadConfig({ MODEL_CONFIG: path.join(dir, "c.yaml"), CONTEXT_SIZE: "512" }).engine.contextSize).toBe(512);
  });

  it("refuses a distributed-only setting without DATABASE_URL, naming it", () => {
    expect(() => loadConfig({ SHARD_SIZE: "10", WORKER_ID: "w1" })).toThrow(
      "SHARD_SIZE=10, WORKER_ID=w1: only the distributed mode (DATABASE_URL) uses this",
    );
  });
});

describe("checkPaths", () => {
  it("refuses a MODEL_PATH that is not a file, except on an API server, which loads no model", () => {
    const missing = path.join(dir, "model.gguf");
    expect(() => checkPaths({ batchDir: dir, modelsDir: dir, modelPath: missing })).toThrow(
      `MODEL_PATH=${missing}: no such file; it must be a .gguf file`,
    );
    expect(() => checkPaths({ batchDir: dir, modelsDir: dir, modelPath: missing, cluster: { role: "worker" } })).toThrow(/no such file/);
    // The Kubernetes ConfigMap gives every pod the workers' MODEL_PATH; the API pods do not mount the models.
    expect(() => checkPaths({ batchDir: dir, modelsDir: dir, modelPath: missing, cluster: { role: "api" } })).not.toThrow();
  });
});

describe("webhook settings", () => {
  const secret = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;

  it("takes a URL with a Standard Webhooks secret, and refuses each half alone or a bad secret, naming it", () => {
    expect(loadConfig({ WEBHOOK_URL: "https://example.test/hooks", WEBHOOK_SECRET: secret }).webhooks.url).toBe(
      "https://example.test/hooks",
    );
    expect(() => loadConfig({ WEBHOOK_URL: "https://example.test/hooks" })).toThrow("WEBHOOK_URL and WEBHOOK_SECRET go together");
    expect(() => loadConfig({ WEBHOOK_URL: "https://example.test/hooks", WEBHOOK_SECRET: "hunter2" })).toThrow(
      "WEBHOOK_SECRET: must be whsec_ and the base64 of 24 to 64 random bytes",
    );
    expect(() => loadConfig({ WEBHOOK_URL: "ftp://example.test", WEBHOOK_SECRET: secret })).toThrow("WEBHOOK_URL: must be an http(s) URL");
    expect(loadConfig({}).webhooks.retrySeconds).toBe(72 * 3600);
  });

  it("takes per-key endpoints only for keys in API_KEYS", () => {
    const byKey = JSON.stringify({ k1: { url: "http://127.0.0.1:9/h", secret } });
    expect(loadConfig({ API_KEYS: "k1,k2", WEBHOOKS_BY_KEY: byKey }).webhooks.byKey).toBe(byKey);
    expect(() => loadConfig({ API_KEYS: "k2", WEBHOOKS_BY_KEY: byKey })).toThrow("WEBHOOKS_BY_KEY: names a key that is not in API_KEYS");
    expect(() => loadConfig({ API_KEYS: "k1", WEBHOOKS_BY_KEY: "{" })).toThrow("WEBHOOKS_BY_KEY: must be JSON");
    const misspelt = JSON.stringify({ k1: { url: "http://127.0.0.1:9/h", secret, retires: 3 } });
    expect(() => loadConfig({ API_KEYS: "k1", WEBHOOKS_BY_KEY: misspelt })).toThrow(
      "invalid configuration: WEBHOOKS_BY_KEY: unknown key 'retires' (valid keys: url, secret)",
    );
  });
});
