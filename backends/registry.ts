// The model registry: the names a batch line may put in `model`, their aliases, and the backend each routes to
// (a GGUF run in-process, or an OpenAI-compatible upstream server). Read once at start from MODELS_FILE (YAML);
// without one, a single local model (MODEL_PATH, or the generated model) answers to every name, as before. A local
// model's path may name a download (hf:<owner>/<repo>[:<quant>], an https:// URL), fetched at start (build.ts).
import path from "node:path";
import YAML from "yaml";
import { z } from "zod";
import { strictObject } from "../config/known-keys.js";
import { parseModelRef } from "../config/model-ref.js";
import { getPreset } from "../engine/gguf/presets.js";
import { DEFAULT_SEED, defaultGeneratedModelDir, GENERATED_MODEL_PRESETS, generatedModelFileName } from "../engine/load/generated-model.js";
import { type Price, PriceSchema, priceFrom } from "./price.js";

export interface LocalBackendSpec {
  kind: "local";
  /** The GGUF file; until the models are fetched (backends/build.ts), a download's reference (hf:..., https://...). */
  path: string;
  /** The generated model's preset: its file is written at start where the cache lacks it. */
  generatedPreset?: string;
  /** Engine options; absent: the service's own settings (CONTEXT_SIZE, SEQUENCES, ...). */
  contextSize?: number;
  sequences?: number;
  contexts?: number;
  threads?: number;
  gpuLayers?: number | "auto";
  /** A LoRA adapter applied over the model of `path` (the base's file; the base is the spec's `parent`). */
  adapter?: { path: string; scale: number };
}

export interface UpstreamBackendSpec {
  kind: "upstream";
  /** OpenAI-compatible base URLs, each ending in the API's version segment (`http://host:8080/v1`). */
  baseUrls: string[];
  /** The upstream's own name for the model (sent as `model`). */
  model: string;
  /** Name of the environment variable holding the API key; the key itself is never in the file or a log. */
  apiKeyEnv?: string;
  /** Bounds of the adaptive limit on requests in flight (upstream/adaptive-limit.ts). */
  minInFlight: number;
  maxInFlight: number;
  timeoutSeconds: number;
  /** Attempts per request for 429, 5xx, resets and timeouts (the first try included). */
  maxAttempts: number;
  /** How lines reach the server so it evaluates shared prompt openings least (upstream/slot-affinity.ts). */
  prefixRouting: "auto" | "slots" | "grouped" | "none";
}

export interface ModelSpec {
  /** What batches and responses name as `model`. */
  name: string;
  aliases: string[];
  backend: LocalBackendSpec | UpstreamBackendSpec;
  /** The project's generated random-weights model (no MODEL_PATH, no file). */
  generated?: boolean;
  /** What it costs to run (the models file's `price`); absent: batches report no cost. */
  price?: Price;
  /** Request parameters its batches' lines take unless the line or the batch's `default_params` set them. */
  defaults?: Record<string, unknown>;
  /** A LoRA adapter's base model (its name): served by the base's engine, on contexts of its own. */
  parent?: string;
}

export class ModelsFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ModelsFileError";
  }
}

export class ModelRegistry {
  private byName = new Map<string, ModelSpec>();
  private list: readonly ModelSpec[];
  private orElse: string | undefined;

  /** `fallback`: the model that serves names the registry does not list (the one-model form); none: refused. */
  constructor(models: readonly ModelSpec[], fallback?: string) {
    this.list = models;
    this.orElse = fallback;
    for (const m of models) {
      for (const n of [m.name, ...m.aliases]) {
        if (this.byName.has(n)) throw new ModelsFileError(`the name '${n}' is given to two models`);
        this.byName.set(n, m);
      }
    }
    if (fallback !== undefined && !this.byName.has(fallback)) throw new ModelsFileError(`default_model '${fallback}' is not a model`);
  }

  get models(): readonly ModelSpec[] {
    return this.list;
  }

  get fallback(): string | undefined {
    return this.orElse;
  }

  /**
   * Takes `other`'s models in place, for everything that holds this registry: an API server with no models of its
   * own follows what its live workers serve (batches/served-models.ts).
   */
  replaceWith(other: ModelRegistry): void {
    this.list = other.list;
    this.orElse = other.orElse;
    this.byName = other.byName;
  }

  /** The same registry cut to the models named in `served` (by name or alias); the fallback stays if it is served. */
  servedBy(served: ReadonlySet<string>): ModelRegistry {
    const models = this.list.filter((m) => [m.name, ...m.aliases].some((n) => served.has(n)));
    const fallback = this.orElse !== undefined && models.some((m) => m.name === this.orElse) ? this.orElse : undefined;
    return new ModelRegistry(models, fallback);
  }

  /** The model serving `name` (a name, an alias, or anything when there is a fallback). */
  resolve(name: string | undefined): ModelSpec | undefined {
    const found = name === undefined ? undefined : this.byName.get(name);
    return found ?? (this.fallback === undefined ? undefined : this.byName.get(this.fallback));
  }

  get(name: string): ModelSpec | undefined {
    return this.models.find((m) => m.name === name);
  }

  /** Every name and alias, for error messages. */
  get names(): string[] {
    return [...this.byName.keys()];
  }
}

/**
 * Bytes of JSON a prompt takes per token, with room: prose, code and ASCII-escaped Chinese took at most 4.4 on the
 * Llama 2 vocabulary (docs/reliability.md); a run of spaces, one token, takes more.
 */
export const PROMPT_BYTES_PER_TOKEN = 8;

/**
 * The local models whose full context, as a prompt, may not fit in a request of `maxLineBytes` (a batch line, or a
 * synchronous request): a longer prompt is refused before the model sees it. Upstream contexts are not known at start.
 */
export function promptsOverLimit(
  registry: ModelRegistry,
  defaultContext: number,
  maxLineBytes: number,
): Array<{ model: string; contextTokens: number; promptBytes: number }> {
  return registry.models.flatMap((m) => {
    if (m.backend.kind !== "local") return [];
    const contextTokens = m.backend.contextSize ?? defaultContext;
    const promptBytes = contextTokens * PROMPT_BYTES_PER_TOKEN;
    return promptBytes > maxLineBytes ? [{ model: m.name, contextTokens, promptBytes }] : [];
  });
}

const positive = z.number().int().min(1);
/** The largest strength an adapter may be applied at, either way. */
export const MAX_ADAPTER_SCALE = 10;
const SCALE_RANGE = `must be between -${MAX_ADAPTER_SCALE} and ${MAX_ADAPTER_SCALE} (1 applies it as trained)`;
const AdapterSchema = strictObject({
  name: z.string().min(1),
  aliases: z.array(z.string().min(1)).optional(),
  path: z.string().min(1),
  // Past this either way the adapter's product swamps the base's weights, and at the extreme overflows to NaN.
  scale: z.number().min(-MAX_ADAPTER_SCALE, { error: SCALE_RANGE }).max(MAX_ADAPTER_SCALE, { error: SCALE_RANGE }).optional(),
  price: PriceSchema.optional(),
  defaults: z.record(z.string(), z.unknown(), { error: "must be a map of request parameters, such as temperature: 0" }).optional(),
});
const LocalSchema = strictObject({
  path: z.string().min(1).optional(),
  /** The project's own random-weights model of this preset, which every clone can make (npm run gen-model). */
  generated: z.enum(GENERATED_MODEL_PRESETS, { error: `must be one of ${GENERATED_MODEL_PRESETS.join(", ")}` }).optional(),
  context_size: z.number().int().min(64).optional(),
  sequences: positive.optional(),
  contexts: positive.optional(),
  threads: positive.optional(),
  gpu_layers: z.union([z.number().int().min(0), z.literal("auto")]).optional(),
  /** LoRA adapters of this model, each served under its own name. */
  adapters: z.array(AdapterSchema).optional(),
});
const UpstreamSchema = strictObject({
  base_urls: z.array(z.url({ protocol: /^https?$/ })).min(1),
  model: z.string().min(1),
  api_key_env: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable's name")
    .optional(),
  min_in_flight: positive.optional(),
  max_in_flight: positive.optional(),
  timeout_seconds: z.number().positive().optional(),
  max_attempts: positive.optional(),
  prefix_routing: z.enum(["auto", "slots", "grouped", "none"], { error: "must be auto, slots, grouped or none" }).optional(),
});
const ModelSchema = strictObject({
  name: z.string().min(1),
  aliases: z.array(z.string().min(1)).optional(),
  local: LocalSchema.optional(),
  upstream: UpstreamSchema.optional(),
  price: PriceSchema.optional(),
  defaults: z.record(z.string(), z.unknown(), { error: "must be a map of request parameters, such as temperature: 0" }).optional(),
})
  .refine((m) => (m.local === undefined) !== (m.upstream === undefined), "needs exactly one of local and upstream")
  .refine((m) => !m.local || (m.local.path === undefined) !== (m.local.generated === undefined), {
    message: "local needs exactly one of path and generated",
    path: ["local"],
  });
const FileSchema = strictObject({
  default_model: z.string().min(1).optional(),
  models: z.array(ModelSchema).min(1),
});

export const UPSTREAM_DEFAULTS = { minInFlight: 1, maxInFlight: 64, timeoutSeconds: 600, maxAttempts: 5 };

/**
 * Parses a models file. Relative GGUF paths are relative to the file; an `api_key_env` must name a variable
 * that is set in `env`. Throws one ModelsFileError naming the file, the entry and the field.
 */
export function parseModelsFile(text: string, source: string, env: Record<string, string | undefined>): ModelRegistry {
  let raw: unknown;
  try {
    raw = YAML.parse(text);
  } catch (err) {
    throw new ModelsFileError(`${source}: not valid YAML: ${(err as Error).message}`);
  }
  const parsed = FileSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "(top level)"}: ${i.message}`);
    throw new ModelsFileError(`${source}: ${issues.join("; ")}`);
  }
  const dir = path.dirname(path.resolve(source));
  const models = parsed.data.models.map((m): ModelSpec => {
    const aliases = m.aliases ?? [];
    const price = {
      ...(m.price ? { price: priceFrom(m.price) } : {}),
      ...(m.defaults && Object.keys(m.defaults).length > 0 ? { defaults: m.defaults } : {}),
    };
    if (m.local) {
      const l = m.local;
      const file = l.generated
        ? path.join(defaultGeneratedModelDir(), generatedModelFileName(getPreset(l.generated), DEFAULT_SEED))
        : localPath(l.path!, dir, `${source}: model '${m.name}': local.path`);
      return {
        name: m.name,
        aliases,
        ...price,
        ...(l.generated ? { generated: true } : {}),
        backend: {
          kind: "local",
          path: file,
          generatedPreset: l.generated,
          contextSize: l.context_size,
          sequences: l.sequences,
          contexts: l.contexts,
          threads: l.threads,
          gpuLayers: l.gpu_layers,
        },
      };
    }
    const u = m.upstream!;
    if (u.api_key_env && env[u.api_key_env] === undefined)
      throw new ModelsFileError(`${source}: model '${m.name}': api_key_env names ${u.api_key_env}, which is not set`);
    const minInFlight = u.min_in_flight ?? UPSTREAM_DEFAULTS.minInFlight;
    const maxInFlight = u.max_in_flight ?? Math.max(minInFlight, UPSTREAM_DEFAULTS.maxInFlight);
    if (minInFlight > maxInFlight)
      throw new ModelsFileError(`${source}: model '${m.name}': min_in_flight ${minInFlight} is above max_in_flight ${maxInFlight}`);
    return {
      name: m.name,
      aliases,
      ...price,
      backend: {
        kind: "upstream",
        baseUrls: u.base_urls.map((b) => b.replace(/\/+$/, "")),
        model: u.model,
        apiKeyEnv: u.api_key_env,
        minInFlight,
        maxInFlight,
        timeoutSeconds: u.timeout_seconds ?? UPSTREAM_DEFAULTS.timeoutSeconds,
        maxAttempts: u.max_attempts ?? UPSTREAM_DEFAULTS.maxAttempts,
        prefixRouting: u.prefix_routing ?? "auto",
      },
    };
  });
  const withAdapters = models.flatMap((spec, i) => [spec, ...adapterSpecs(parsed.data.models[i]!.local?.adapters, spec, dir, source)]);
  try {
    return new ModelRegistry(withAdapters, parsed.data.default_model);
  } catch (err) {
    throw new ModelsFileError(`${source}: ${(err as Error).message}`);
  }
}

/**
 * A local model's adapters as models of their own: the base's engine settings, the adapter's file and scale, its own
 * price and defaults where given, else the base's (usage, limits and costs count them under the adapter's name).
 */
function adapterSpecs(
  adapters: Array<z.output<typeof AdapterSchema>> | undefined,
  base: ModelSpec,
  dir: string,
  source: string,
): ModelSpec[] {
  if (!adapters || base.backend.kind !== "local") return [];
  const backend = base.backend;
  return adapters.map((a, i) => {
    const where = `${source}: model '${base.name}': local.adapters.${i}.path`;
    const file = localPath(a.path, dir, where);
    if (parseModelRef(file).kind !== "file") throw new ModelsFileError(`${where}: an adapter must be a local .gguf file`);
    const price = a.price ? priceFrom(a.price) : base.price;
    const defaults = a.defaults && Object.keys(a.defaults).length > 0 ? a.defaults : base.defaults;
    return {
      name: a.name,
      aliases: a.aliases ?? [],
      parent: base.name,
      ...(price ? { price } : {}),
      ...(defaults ? { defaults } : {}),
      ...(base.generated ? { generated: true } : {}),
      backend: { ...backend, adapter: { path: file, scale: a.scale ?? 1 } },
    };
  });
}

/** A file relative to the models file; a download's reference kept for the fetch, once it is known to be one. */
function localPath(p: string, dir: string, where: string): string {
  try {
    return parseModelRef(p).kind === "file" ? path.resolve(dir, p) : p.trim();
  } catch (err) {
    throw new ModelsFileError(`${where}: ${(err as Error).message}`);
  }
}

/**
 * What a worker tells the API servers of the models it serves (in its heartbeat row): their names, aliases, prices and
 * defaults, and the one that answers names no model has; never a path, a URL or a key.
 */
export interface ModelCatalogue {
  models: Array<Pick<ModelSpec, "name" | "aliases" | "generated" | "price" | "defaults" | "parent"> & { kind: "local" | "upstream" }>;
  fallback?: string;
}

/** The catalogue of `registry`'s models, or of those named in `only`. */
export function catalogueOf(registry: ModelRegistry, only?: readonly string[]): ModelCatalogue {
  const models = registry.models
    .filter((m) => !only || only.includes(m.name))
    .map((m) => ({
      name: m.name,
      aliases: m.aliases,
      kind: m.backend.kind,
      ...(m.generated ? { generated: true } : {}),
      ...(m.price ? { price: m.price } : {}),
      ...(m.defaults ? { defaults: m.defaults } : {}),
      ...(m.parent ? { parent: m.parent } : {}),
    }));
  const fallback = registry.fallback !== undefined && models.some((m) => m.name === registry.fallback) ? registry.fallback : undefined;
  return { models, ...(fallback ? { fallback } : {}) };
}

/**
 * The registry of the models several workers' catalogues name, as an API server with no models of its own routes by
 * them: a name (or an alias) belongs to the first catalogue that gives it, and the first fallback answers other names.
 * Their backends are the workers': here they only name batches.
 */
export function registryOfCatalogues(catalogues: readonly ModelCatalogue[]): ModelRegistry {
  const models: ModelSpec[] = [];
  const taken = new Set<string>();
  let fallback: string | undefined;
  for (const c of catalogues) {
    for (const m of c.models) {
      if (taken.has(m.name)) continue;
      const aliases = m.aliases.filter((a) => !taken.has(a) && a !== m.name);
      for (const n of [m.name, ...aliases]) taken.add(n);
      const { kind, ...spec } = m;
      models.push({ ...spec, aliases, backend: kind === "local" ? { kind, path: "" } : elsewhere(m.name) });
    }
    fallback ??= c.fallback;
  }
  return new ModelRegistry(models, fallback);
}

/** An upstream model served by the workers: an API server never sends it anything itself. */
const elsewhere = (model: string): UpstreamBackendSpec => ({
  kind: "upstream",
  baseUrls: [],
  model,
  ...UPSTREAM_DEFAULTS,
  prefixRouting: "none",
});

/** The model name the README's curl demo sends: the one-model form answers to it. */
export const DEMO_MODEL_NAME = "Qwen/Qwen2.5-0.5B-Instruct";

/** Without a models file: one local model, named after its file (or `name`), that serves every name. */
export function singleModelRegistry(
  modelPath: string,
  generated: boolean,
  name = path.basename(modelPath).replace(/\.gguf$/i, ""),
): ModelRegistry {
  const aliases = name === DEMO_MODEL_NAME ? [] : [DEMO_MODEL_NAME];
  return new ModelRegistry([{ name, aliases, backend: { kind: "local", path: modelPath }, generated }], name);
}
