// What `npm run keys` is asked: `new <id>` with its flags read into a keys-file entry the start loads (checked by the
// keys file's own schema), `hash`, or a usage error in one line naming the flag or value at fault.
import { keyEntryProblems } from "../config/keys.js";
import { nearestKey } from "../config/known-keys.js";

export const KEYS_USAGE = "usage: npm run keys -- new <id> [--admin] [--weight N] [--limit MODEL=TOKENS]... | hash < secret";

export type KeysCommand =
  | { kind: "new"; id: string; fields: Record<string, unknown> }
  | { kind: "hash" }
  | { kind: "help" }
  | { kind: "usage"; message: string };

const FLAGS = ["--admin", "--weight", "--limit", "--help"];

/** A number as written (digits, a sign, a decimal point): Number() would take "", "0x10" and "1e3". */
const numberOf = (v: string) => (/^\s*[+-]?\d+(\.\d+)?\s*$/.test(v) ? Number(v) : undefined);

class Usage extends Error {}

/** The flags of `new` after the id: the entry's fields besides id and sha256. */
function readFlags(args: string[]): { positionals: string[]; fields: Record<string, unknown> } {
  const fields: Record<string, unknown> = {};
  const limits: Record<string, number> = {};
  const positionals: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--") {
      positionals.push(...args.slice(i + 1));
      break;
    }
    if (!arg.startsWith("-") || arg === "-") {
      positionals.push(arg);
      continue;
    }
    const [flag, inline] = arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined];
    if (!FLAGS.includes(flag) || flag === "--help") {
      const near = nearestKey(flag, FLAGS);
      throw new Usage(`unknown option '${flag}'${near ? ` (did you mean ${near}?)` : ` (options: ${FLAGS.join(", ")})`}`);
    }
    if (flag === "--admin") {
      if (inline !== undefined) throw new Usage("--admin takes no value");
      fields.admin = true;
      continue;
    }
    const value = inline ?? args[++i];
    if (value === undefined) throw new Usage(`${flag} needs a value (${flag === "--weight" ? "--weight N" : "--limit MODEL=TOKENS"})`);
    if (flag === "--weight") {
      if (fields.weight !== undefined) throw new Usage("--weight is given twice");
      fields.weight = numberOf(value) ?? fail(`--weight '${value}': must be a number`);
    } else {
      const eq = value.lastIndexOf("=");
      if (eq < 0) throw new Usage(`--limit '${value}': must be MODEL=TOKENS ('*' for every model not named)`);
      const [model, tokens] = [value.slice(0, eq), value.slice(eq + 1)];
      if (!model.trim()) throw new Usage(`--limit '${value}': MODEL is empty ('*' for every model not named)`);
      if (model in limits) throw new Usage(`--limit: the model '${model}' is given twice`);
      limits[model] = numberOf(tokens) ?? fail(`--limit '${value}': TOKENS must be a whole number`);
    }
  }
  if (Object.keys(limits).length > 0) fields.enqueued_token_limits = limits;
  return { positionals, fields };
}

const fail = (message: string): never => {
  throw new Usage(message);
};

/** The flag and value a field of the entry came from, for a problem the schema finds ("weight: …": "--weight 0: …"). */
function flagOf(problem: string, id: string, fields: Record<string, unknown>): string {
  const [field] = problem.split(":");
  const why = problem.slice(field.length);
  if (field === "id") return `the id '${id}'${why}`;
  if (field === "weight") return `--weight ${fields.weight}${why}`;
  const model = /^enqueued_token_limits\.(.+)$/.exec(field)?.[1];
  const limits = fields.enqueued_token_limits as Record<string, number> | undefined;
  if (model !== undefined) return `--limit '${model}=${limits?.[model]}'${why}`;
  return problem;
}

/** `npm run keys`'s arguments (after `--`), read; a `new` entry is one the keys file's schema takes, sha256 aside. */
export function parseKeysCommand(argv: readonly string[]): KeysCommand {
  const [command, ...rest] = argv;
  try {
    if (command === "--help" || command === "-h" || command === "help") return { kind: "help" };
    if (command === "hash") {
      if (rest.length > 0) throw new Usage(`hash takes no argument (it reads the secret from standard input): '${rest[0]}'`);
      return { kind: "hash" };
    }
    if (command !== "new") throw new Usage(command === undefined ? "a command is needed" : `unknown command '${command}'`);
    const { positionals, fields } = readFlags(rest);
    if (positionals.length === 0) throw new Usage("new needs the key's id (npm run keys -- new <id>)");
    if (positionals.length > 1) throw new Usage(`new takes one id: unexpected '${positionals[1]}'`);
    const id = positionals[0];
    // A well-formed placeholder stands for the sha256, which the secret made later gives.
    const problems = keyEntryProblems({ id, sha256: "0".repeat(64), ...fields });
    if (problems.length > 0) throw new Usage(problems.map((p) => flagOf(p, id, fields)).join("; "));
    return { kind: "new", id, fields };
  } catch (err) {
    if (err instanceof Usage) return { kind: "usage", message: err.message };
    throw err;
  }
}
