// The bench's command line (npm run bench -- <options>): each option checked, --help's text, and one clear line for a
// mistake (an unknown option, a part that does not exist, a count that is not a number) before anything runs.
import { parseArgs } from "node:util";

export const PARTS = [
  "peer",
  "scheduling",
  "upstream",
  "throughput",
  "scale",
  "prefix",
  "embeddings",
  "distributed",
  "datasets",
  "lanes",
  "cache",
  "adapters",
] as const;
export type Part = (typeof PARTS)[number];

/** How long a run takes on 2 cores, by the times of its parts on docs/performance.md; each run prints its own. */
export const DURATION = { full: "about two hours", quick: "about 15 minutes" } as const;

const OPTIONS = {
  help: { type: "boolean", short: "h", default: false },
  quick: { type: "boolean", default: false },
  only: { type: "string" },
  stories: { type: "string" },
  model: { type: "string", default: "" },
  lines: { type: "string" },
  workloads: { type: "string", default: "" },
  slots: { type: "string", default: "" },
  ablations: { type: "string", default: "true" },
  "front-pairs": { type: "string" },
  "front-slots": { type: "string" },
  "dataset-rows": { type: "string" },
  "dataset-memory-rows": { type: "string" },
  "dataset-pairs": { type: "string" },
  "lanes-slots": { type: "string" },
  "lanes-rate": { type: "string" },
  "lanes-model": { type: "string" },
  "cache-lines": { type: "string" },
  "cache-rounds": { type: "string" },
  "cache-rows": { type: "string" },
  "cache-entries": { type: "string" },
  "cache-lookups": { type: "string" },
} as const;

export const USAGE = `npm run bench [-- options]

Runs every comparison of docs/performance.md in one go, prints one table of ratios and each goal met or missed,
writes bench/results/latest.json (latest-quick.json for --quick) and the chart. A full run takes ${DURATION.full}
on 2 cores, --quick ${DURATION.quick}; each run prints how long each part took.

  --quick                   a smaller plan: stories260K where ../shared/models has it, else the generated
                            'small' model (the run says which)
  --only <parts>            some parts only, comma-separated: ${PARTS.join(", ")}
  --model <text>            only the models whose name holds it (stories, small, qwen)
  --stories <file.gguf>     stories260K's path (default ../shared/models/stories260K.gguf)
  --workloads <names>       only the scheduling and peer workloads whose name holds one of these (families,varied)
  --lines <n>               the scheduling workloads at n lines (one llama-server configuration, no ablations)
  --slots <n,n>             llama-server's --parallel values swept in the scheduling part
  --ablations false         skip the scheduling part's runs with the line order and the prefix copies switched off
  --front-pairs <n>         pairs of in-front and direct runs in the scheduling part (each side keeps its best)
  --front-slots <n>         llama-server's slots in those pairs, where not the sweep's best
  --dataset-rows <n>        rows timed against JSONL in the datasets part
  --dataset-memory-rows <n,n>  the row counts whose peak memory is compared
  --dataset-pairs <n>       pairs of dataset job and JSONL runs
  --lanes-slots <n>         llama-server's slots beside the service in the lanes part (default 16)
  --lanes-rate <n>          interactive requests a second in the lanes part (default 1)
  --lanes-model <m>         the lanes part's model: small (default) or qwen2.5-0.5b, generated, or stories
  --cache-lines <n>         lines of each batch in the cache part (default 2000)
  --cache-rounds <n>        batches of each side of its batch rows, in turn, each side's fastest kept (default 2)
  --cache-rows <n>          rows of its dataset job (default 10000)
  --cache-entries <n,n>     answers the embedded store holds at each memory sample (default 10000,1000000)
  --cache-lookups <n>       lookups timed on each store (default 20000)
  -h, --help                this text

bench/README.md says what each part measures and how.`;

export interface BenchArgs {
  quick: boolean;
  parts: Set<Part>;
  stories?: string;
  model: string;
  lines?: number;
  workloads: string[];
  slots?: number[];
  ablations: boolean;
  frontPairs: number;
  frontSlots?: number;
  datasetRows?: number;
  datasetMemoryRows?: number[];
  datasetPairs?: number;
  lanesSlots: number;
  lanesRate: number;
  lanesModel: LanesModel;
  cacheLines?: number;
  cacheRounds?: number;
  cacheRows?: number;
  cacheEntries?: number[];
  cacheLookups?: number;
}

/** A mistake on the command line: its message is the one line the bench prints before it exits. */
export class BenchUsageError extends Error {}

const list = (v: string) =>
  v
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

/** A whole number of at least 1; `name` is the option as the user typed it. */
function whole(name: string, given: string): number {
  const n = Number(given);
  if (given.trim() !== "" && Number.isInteger(n) && n >= 1) return n;
  throw new BenchUsageError(`--${name} takes a whole number of at least 1, not ${JSON.stringify(given)}`);
}

function positive(name: string, given: string): number {
  const n = Number(given);
  if (given.trim() !== "" && Number.isFinite(n) && n > 0) return n;
  throw new BenchUsageError(`--${name} takes a number above 0, not ${JSON.stringify(given)}`);
}

const wholes = (name: string, given: string) => list(given).map((v) => whole(name, v));

/** The options, or "help"; throws BenchUsageError naming what is wrong. */
export function benchArgs(argv: string[]): BenchArgs | "help" {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: false }));
  } catch (err) {
    // node's messages end with advice for scripts ("To specify a positional argument starting with a '-'..."):
    // the first sentence is the user's.
    const said = err instanceof Error ? err.message.split(". ")[0] : String(err);
    throw new BenchUsageError(`${said}. npm run bench -- --help lists the options.`);
  }
  if (values.help) return "help";
  const v = values as Record<string, string | undefined> & { quick: boolean };
  const parts = new Set<Part>(PARTS);
  if (v.only !== undefined) {
    const asked = list(v.only);
    const unknown = asked.filter((p) => !(PARTS as readonly string[]).includes(p));
    if (unknown.length > 0 || asked.length === 0)
      throw new BenchUsageError(`--only takes parts among ${PARTS.join(", ")}; not ${JSON.stringify(unknown.join(",") || v.only)}`);
    parts.clear();
    for (const p of asked) parts.add(p as Part);
  }
  if (v.ablations !== "true" && v.ablations !== "false")
    throw new BenchUsageError(`--ablations takes true or false, not ${JSON.stringify(v.ablations)}`);
  return {
    quick: v.quick,
    parts,
    stories: v.stories,
    model: v.model ?? "",
    lines: v.lines === undefined ? undefined : whole("lines", v.lines),
    workloads: list(v.workloads ?? ""),
    slots: v.slots ? wholes("slots", v.slots) : undefined,
    ablations: v.ablations === "true",
    frontPairs: v["front-pairs"] === undefined ? 1 : whole("front-pairs", v["front-pairs"]),
    frontSlots: v["front-slots"] === undefined ? undefined : whole("front-slots", v["front-slots"]),
    datasetRows: v["dataset-rows"] === undefined ? undefined : whole("dataset-rows", v["dataset-rows"]),
    datasetMemoryRows: v["dataset-memory-rows"] === undefined ? undefined : wholes("dataset-memory-rows", v["dataset-memory-rows"]),
    datasetPairs: v["dataset-pairs"] === undefined ? undefined : whole("dataset-pairs", v["dataset-pairs"]),
    lanesSlots: v["lanes-slots"] === undefined ? 16 : whole("lanes-slots", v["lanes-slots"]),
    lanesRate: v["lanes-rate"] === undefined ? 1 : positive("lanes-rate", v["lanes-rate"]),
    lanesModel: lanesModel(v["lanes-model"]),
    ...cacheArgs(v),
  };
}

export const LANES_MODELS = ["small", "qwen2.5-0.5b", "stories"] as const;
export type LanesModel = (typeof LANES_MODELS)[number];

function lanesModel(value: string | undefined): LanesModel {
  if (value === undefined) return "small";
  if ((LANES_MODELS as readonly string[]).includes(value)) return value as LanesModel;
  throw new BenchUsageError(`--lanes-model takes one of ${LANES_MODELS.join(", ")}, not ${JSON.stringify(value)}`);
}

/** The cache part's sizes, where given. */
function cacheArgs(v: Record<string, string | undefined>): Partial<BenchArgs> {
  const one = (name: string) => (v[name] === undefined ? undefined : whole(name, v[name]));
  const entries = v["cache-entries"] === undefined ? undefined : wholes("cache-entries", v["cache-entries"]);
  if (entries && (entries.length === 0 || entries.some((n, i) => i > 0 && n <= entries[i - 1])))
    throw new BenchUsageError(`--cache-entries takes growing counts such as 10000,1000000, not ${JSON.stringify(v["cache-entries"])}`);
  return {
    cacheLines: one("cache-lines"),
    cacheRounds: one("cache-rounds"),
    cacheRows: one("cache-rows"),
    cacheEntries: entries,
    cacheLookups: one("cache-lookups"),
  };
}
