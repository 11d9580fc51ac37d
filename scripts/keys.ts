// `npm run keys -- new <id> [--admin] [--weight N] [--limit MODEL=TOKENS ...]`: makes a fresh secret and prints it
// once, with the keys-file entry that holds its sha256 (the file never holds the secret). `hash` prints the sha256
// of a secret read from standard input, for a key made elsewhere.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import YAML from "yaml";
import { keyEntryProblems, sha256Hex } from "../config/keys.js";
import { KEYS_USAGE, parseKeysCommand } from "./keys-command.js";

const command = parseKeysCommand(process.argv.slice(2));
if (command.kind === "usage") {
  console.error(`npm run keys: ${command.message} (${KEYS_USAGE})`);
  process.exit(2);
} else if (command.kind === "help") {
  console.log(KEYS_USAGE);
} else if (command.kind === "hash") {
  const secret = readFileSync(0, "utf8").trim();
  // An empty secret (Ctrl-D at once, an empty pipe) would hash to a value that looks like any other.
  if (!secret) {
    console.error("npm run keys: hash: standard input holds no secret (npm run keys -- hash < secret-file)");
    process.exit(2);
  }
  process.stdout.write(`${sha256Hex(secret)}\n`);
} else {
  const secret = `sk-obi-${randomBytes(24).toString("base64url")}`;
  const entry = { id: command.id, sha256: sha256Hex(secret), ...command.fields };
  const printed = YAML.stringify([entry]);
  // What is printed is read back as the start reads the file: it must load.
  const problems = keyEntryProblems((YAML.parse(printed) as unknown[])[0]);
  if (problems.length > 0) throw new Error(`the entry made does not load: ${problems.join("; ")}`);
  process.stderr.write(`The secret for ${command.id} (shown once; give it to its team, keep only the hash):\n`);
  process.stdout.write(`${secret}\n`);
  process.stderr.write("\nIts entry for the keys file (KEYS_FILE), under keys:\n");
  process.stderr.write(printed);
}
