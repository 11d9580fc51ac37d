// Environment variables that look like a setting but are none (KEY_FILE for KEYS_FILE, MAX_QUEUE_DEPHT), each named
// with the setting meant, so a typo cannot leave the API open or a default in force without a word.
import { distance } from "fastest-levenshtein";
import { nearestKey } from "./known-keys.js";

/** Variables the service reads that are not settings (the YAML file's name, the runner's log format). */
const READ_BESIDES = ["MODEL_CONFIG", "LOG_FORMAT"];

/**
 * Variables of shells, containers, PostgreSQL's clients and Node that may sit near a setting's name (HOME and HOST,
 * PGPORT and PORT): never taken for a typo.
 */
const SYSTEM = new Set(
  "HOME PATH HOSTNAME HOSTTYPE TERM PWD OLDPWD SHELL SHLVL USER LOGNAME LANG LANGUAGE TZ TMPDIR TEMP TMP MAIL EDITOR PAGER DISPLAY COLUMNS LINES NODE_ENV NODE_OPTIONS PGHOST PGPORT PGUSER PGDATABASE PGPASSWORD INIT_CWD".split(
    " ",
  ),
);

/** Prefixes other programs own though a setting begins with them too: HF_HOME is Hugging Face's, HTTP_PROXY everyone's. */
const FOREIGN_PREFIXES = new Set(["HF", "HTTP"]);

/** Kubernetes' service links (WORKER_PORT=tcp://…, WORKER_SERVICE_HOST): a Service's address, never a setting. */
const isServiceLink = (name: string, value: string) =>
  /_SERVICE_(HOST|PORT)(_\w+)?$|_PORT_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?$/.test(name) ||
  (/_PORT$/.test(name) && /^(tcp|udp|sctp):\/\//.test(value));

export interface EnvNames {
  /** Each setting's variable. */
  settings: readonly string[];
  /** Each setting's dotted YAML key with the variable it has: engine.threads is read as THREADS. */
  yaml: ReadonlyArray<{ key: string; env: string }>;
}

/** The setting `name` may have meant, spelt like it (two edits, one for a short name) or as its YAML key is. */
function nearSetting(name: string, names: EnvNames, aliases: Map<string, string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of [...names.settings, ...READ_BESIDES, ...aliases.keys()]) {
    const within = Math.min(name.length, candidate.length) <= 4 ? 1 : 2;
    // Names whose lengths differ by more are further apart than that: every start checks each variable of its
    // environment against every setting, and measuring them all cost it 10 ms.
    if (Math.abs(name.length - candidate.length) > within) continue;
    const d = distance(name, candidate);
    if (d <= within && d < bestDistance) [best, bestDistance] = [aliases.get(candidate) ?? candidate, d];
  }
  return best;
}

/**
 * One problem for each variable of `env` that is not a setting but is spelt within an edit or two of one, or as a
 * setting's YAML key (ENGINE_THREADS), or begins with a prefix settings share (MAX_, DATASET_, ENGINE_) and names
 * none of them; `allowed` (ENV_NOT_SETTINGS) lists the variables meant for other programs.
 */
export function misspeltEnvNames(env: Record<string, string | undefined>, names: EnvNames, allowed: readonly string[]): string[] {
  const settings = new Set(names.settings);
  const aliases = new Map(names.yaml.map(({ key, env: v }) => [key.toUpperCase().replaceAll(".", "_"), v]));
  const counts = new Map<string, number>();
  for (const s of names.settings) counts.set(s.split("_")[0], (counts.get(s.split("_")[0]) ?? 0) + 1);
  const prefixes = new Set([...counts].filter(([, n]) => n > 1).map(([p]) => p));
  for (const { key } of names.yaml) prefixes.add(key.split(".")[0].toUpperCase());
  for (const p of FOREIGN_PREFIXES) prefixes.delete(p);
  const problems: string[] = [];
  for (const [raw, value] of Object.entries(env)) {
    const name = raw.toUpperCase();
    if (settings.has(raw) || READ_BESIDES.includes(raw) || allowed.includes(raw)) continue;
    if (SYSTEM.has(name) || name.startsWith("NPM_") || isServiceLink(name, value ?? "")) continue;
    const near = settings.has(name) ? name : nearSetting(name, names, aliases);
    const prefix = name.split("_")[0];
    if (near) problems.push(`${raw} is not a setting (did you mean ${near}?)`);
    else if (name.includes("_") && prefixes.has(prefix)) {
      const guess = nearestKey(name, [...names.settings, ...READ_BESIDES, ...aliases.keys()]);
      const section = names.yaml.filter(({ key }) => key.startsWith(`${prefix.toLowerCase()}.`)).map(({ env: v }) => v);
      const of = [...new Set([...names.settings.filter((s) => s.startsWith(`${prefix}_`)), ...section])];
      const hint = guess ? `did you mean ${aliases.get(guess) ?? guess}?` : `the ${prefix}_ settings are ${of.join(", ")}`;
      problems.push(`${raw} is not a setting (${hint})`);
    }
  }
  return problems;
}
