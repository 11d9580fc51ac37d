// `npm run keys -- new <id> [--admin] [--weight N] [--limit MODEL=TOKENS ...]`: makes a fresh secret and prints it
// once, with the keys-file entry that holds its sha256 (the file never holds the secret). `hash` prints the sha256
// of a secret read from standard input, for a key made elsewhere.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import YAML from "yaml";
import { sha256Hex } from "../config/keys.js";

const [command, id, ...rest] = process.argv.slice(2);
if (command === "hash") {
  process.stdout.write(`${sha256Hex(readFileSync(0, "utf8").trim())}\n`);
} else if (command === "new" && id) {
  const secret = `sk-obi-${randomBytes(24).toString("base64url")}`;
  const entry: Record<string, unknown> = { id, sha256: sha256Hex(secret) };
  const limits: Record<string, number> = {};
  for (let i = 0; i < rest.length; i++) {
    if (rest[i] === "--admin") entry.admin = true;
    else if (rest[i] === "--weight") entry.weight = Number(rest[++i]);
    else if (rest[i] === "--limit") {
      const [model, tokens] = (rest[++i] ?? "").split("=");
      limits[model] = Number(tokens);
    } else {
      console.error(`unknown option ${rest[i]}`);
      process.exit(2);
    }
  }
  if (Object.keys(limits).length > 0) entry.enqueued_token_limits = limits;
  process.stderr.write(`The secret for ${id} (shown once; give it to its team, keep only the hash):\n`);
  process.stdout.write(`${secret}\n`);
  process.stderr.write("\nIts entry for the keys file (KEYS_FILE), under keys:\n");
  process.stderr.write(YAML.stringify([entry]));
} else {
  console.error("usage: npm run keys -- new <id> [--admin] [--weight N] [--limit MODEL=TOKENS]... | hash < secret");
  process.exit(2);
}
