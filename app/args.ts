// The server's command line: a few flags (settings are environment variables), any other argument refused with one line.
import { nearestKey } from "../config/known-keys.js";

export type ServerCommand =
  | { kind: "serve" }
  | { kind: "help" }
  | { kind: "migrate" }
  | { kind: "migrate-down"; target: string }
  | { kind: "fetch-models" }
  | { kind: "usage"; message: string };

/** The flags the server knows, as --help and the refusals list them. */
export const SERVER_FLAGS = ["--help", "--migrate", "--migrate-down", "--fetch-models"] as const;

/** What --help says of the flags, below the settings. */
export const SERVER_FLAGS_HELP = [
  "flags (without one, the server starts):",
  "  --migrate                  apply the schema's migrations (DATABASE_URL) and exit",
  "  --migrate-down <version>   revert the migrations newer than <version> (none: all) and exit",
  "  --fetch-models             download the models the settings name and exit",
  "  --help                     this text",
].join("\n");

/**
 * What the command line asks for. An unknown argument is refused (`usage`), never ignored: one that names a setting
 * (`--port 9999`) is answered with the environment variable that sets it (PORT=9999), another with the nearest flag.
 * `settings` are the settings' environment variables.
 */
export function parseServerArgs(argv: readonly string[], settings: readonly string[]): ServerCommand {
  if (argv.includes("--help") || argv.includes("-h")) return { kind: "help" };
  const commands: ServerCommand[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--migrate") commands.push({ kind: "migrate" });
    else if (arg === "--fetch-models") commands.push({ kind: "fetch-models" });
    else if (arg === "--migrate-down") {
      const target = argv[i + 1];
      if (target === undefined || target.startsWith("-"))
        return usage("--migrate-down needs the version to go back to (--migrate-down 004_webhooks, or none for an empty schema)");
      commands.push({ kind: "migrate-down", target });
      i++;
    } else return usage(unknownArgument(arg, argv[i + 1], settings));
  }
  if (commands.length > 1) return usage(`${argv.filter((a) => a.startsWith("--")).join(" ")}: one of them at a time`);
  return commands[0] ?? { kind: "serve" };
}

const usage = (message: string): ServerCommand => ({ kind: "usage", message });

function unknownArgument(arg: string, next: string | undefined, settings: readonly string[]): string {
  const [flag, inline] = arg.split(/=(.*)/s, 2);
  const env = flag.replace(/^-+/, "").replaceAll("-", "_").toUpperCase();
  const value = inline ?? (next !== undefined && !next.startsWith("-") ? next : "…");
  const setting = settings.includes(env) ? env : undefined;
  if (setting) return `unknown argument '${flag}': settings are environment variables: ${setting}=${value} (--help lists them)`;
  const near = nearestKey(flag, SERVER_FLAGS);
  if (near) return `unknown argument '${arg}' (did you mean ${near}?)`;
  const likeSetting = flag.startsWith("--") ? nearestKey(env, settings) : undefined;
  if (likeSetting)
    return `unknown argument '${flag}': settings are environment variables (did you mean ${likeSetting}=${value}?; --help lists them)`;
  return `unknown argument '${arg}': the server takes ${SERVER_FLAGS.join(", ")}; settings are environment variables (--help lists them)`;
}
