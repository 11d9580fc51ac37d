// API keys with properties: a name, an admin flag, enqueued-token limits, a file storage bound, a share weight and a
// webhook. Declared
// once, in the keys file (KEYS_FILE) and the bare API_KEYS list, read and checked at start. The file holds each
// secret's sha256, never the secret: `npm run keys -- new <name>` makes a key and prints both.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import YAML from "yaml";
import { z } from "zod";
import { strictObject } from "./known-keys.js";

export interface ApiKey {
  /** The key's name: what usage, costs, /metrics and the console show (`api_key_id`); never the secret. */
  id: string;
  /** The first 32 hex digits of the secret's sha256: what owns the key's files and batches. */
  owner: string;
  /** The secret's sha256 (hex), compared in constant time. */
  sha256: string;
  admin: boolean;
  /** Its share of the workers among keys with waiting work of equal urgency. */
  weight: number;
  /** Enqueued tokens allowed per model; `*` for every model not named. */
  limits: Readonly<Record<string, number>>;
  /** The bytes its stored files may hold together (FILE_STORAGE_DEFAULT_BYTES unless the keys file says). */
  fileStorageBytes: number;
  webhook?: { url: string; secret: string };
  /** The result cache it shares with the keys naming the same one (cache_scope); absent: its own. */
  cacheScope?: string;
  /** Defaults for its batches' stop rules (a batch's own `metadata` keys win). */
  stopRules?: { maxErrorRate?: number; maxCost?: number; maxOutputTokens?: number };
}

/**
 * What a key's files may hold together unless its entry sets `file_storage_limit_bytes`: 10 GiB, fifty uploads of the
 * largest MAX_FILE_BYTES allows by default, so no one key fills the disk that every key's batches write to.
 */
export const FILE_STORAGE_DEFAULT_BYTES = 10 * 1024 ** 3;

/** A key's id is how the console and metrics name it: short and plain. */
const ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

const KeySchema = strictObject({
  id: z.string().regex(ID, "must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"),
  sha256: z.string().regex(/^[0-9a-f]{64}$/, "must be the secret's sha256 in 64 lowercase hex digits (npm run keys -- new <name>)"),
  admin: z.boolean().default(false),
  weight: z.number().positive("must be above 0").max(1000, "must be at most 1000").default(1),
  enqueued_token_limits: z
    .record(z.string().min(1), z.number().int("must be a whole number >= 1").min(1, "must be a whole number >= 1"))
    .default({}),
  file_storage_limit_bytes: z.number().int().min(1, "must be a whole number of bytes >= 1").default(FILE_STORAGE_DEFAULT_BYTES),
  webhook: strictObject({ url: z.string(), secret: z.string() }).optional(),
  cache_scope: z.string().regex(ID, "must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit").optional(),
  stop_rules: strictObject({
    max_error_rate: z.number().gt(0, "must be above 0").max(1, "must be at most 1 (a fraction: 0.2 is 20%)").optional(),
    max_cost: z.number().gt(0, "must be above 0").optional(),
    max_output_tokens: z.number().int().min(1, "must be a whole number >= 1").optional(),
  }).optional(),
});

const FileSchema = strictObject({ keys: z.array(z.unknown()) });

export const sha256Hex = (secret: string) => createHash("sha256").update(secret, "utf8").digest("hex");

/** The owner of a secret's objects: the first 32 hex digits of its sha256 (as domain/owner.ts derives it). */
export const ownerOfDigest = (sha256: string) => sha256.slice(0, 32);

/** The owner of a secret's objects (domain/owner.ts's ownerOf). */
export const ownerOfSecret = (secret: string) => ownerOfDigest(sha256Hex(secret));

/** What a key without an id of its own is called: `key_` and its owner's first 8 hex digits. */
export const keyIdOfOwner = (owner: string) => `key_${owner.slice(0, 8)}`;

/** A bare API_KEYS key: not an admin, weight 1, no limits, the default file storage, named by its owner's first 8 hex digits. */
export function bareKey(secret: string): ApiKey {
  const sha256 = sha256Hex(secret);
  const owner = ownerOfDigest(sha256);
  return { id: keyIdOfOwner(owner), owner, sha256, admin: false, weight: 1, limits: {}, fileStorageBytes: FILE_STORAGE_DEFAULT_BYTES };
}

/**
 * Every key: API_KEYS' and the keys file's. Throws an Error whose message is one line per bad entry (the file,
 * the entry's place and id, what is wrong), none of them naming a secret.
 */
export function loadKeys(apiKeys: readonly string[], keysFile: string): ApiKey[] {
  const keys = apiKeys.map(bareKey);
  if (keysFile) keys.push(...readKeysFile(keysFile));
  const problems: string[] = [];
  const seen = new Map<string, string>();
  for (const k of keys) {
    const other = seen.get(k.sha256);
    if (other) problems.push(`keys ${other} and ${k.id} have the same secret`);
    seen.set(k.sha256, k.id);
  }
  const ids = keys.map((k) => k.id);
  for (const id of new Set(ids.filter((id, i) => ids.indexOf(id) !== i))) problems.push(`the id ${id} is given to more than one key`);
  if (problems.length > 0) throw new Error(problems.join("\n"));
  return keys;
}

/**
 * What is wrong with one entry of the keys file, each as `field: message` ("weight: must be above 0"), by the schema
 * the start reads the file with: none when it loads. `npm run keys` checks what it prints with it.
 */
export function keyEntryProblems(entry: unknown): string[] {
  const parsed = KeySchema.safeParse(entry);
  if (!parsed.success) return parsed.error.issues.map((issue) => `${issue.path.join(".") || "entry"}: ${issue.message}`);
  const url = parsed.data.webhook?.url;
  return url !== undefined && !/^https?:\/\//.test(url) ? ["webhook.url: must be an http(s) URL"] : [];
}

function readKeysFile(file: string): ApiKey[] {
  let doc: unknown;
  try {
    doc = YAML.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new Error(`KEYS_FILE ${file}: cannot be read: ${(err as Error).message}`);
  }
  const top = FileSchema.safeParse(doc);
  if (!top.success) {
    const unknown = top.error.issues.filter((i) => i.code === "unrecognized_keys").map((i) => i.message);
    throw new Error(`KEYS_FILE ${file}: ${unknown.length > 0 ? unknown.join("; ") : 'must hold "keys:", a list of keys'}`);
  }
  const problems: string[] = [];
  const keys: ApiKey[] = [];
  top.data.keys.forEach((entry, i) => {
    const name = (entry as { id?: unknown } | null)?.id;
    const where = `KEYS_FILE ${file}: keys[${i}]${typeof name === "string" ? ` (${name})` : ""}`;
    const wrong = keyEntryProblems(entry);
    if (wrong.length > 0) {
      problems.push(...wrong.map((w) => `${where}: ${w}`));
      return;
    }
    const k = KeySchema.parse(entry);
    keys.push({
      id: k.id,
      owner: ownerOfDigest(k.sha256),
      sha256: k.sha256,
      admin: k.admin,
      weight: k.weight,
      limits: k.enqueued_token_limits,
      fileStorageBytes: k.file_storage_limit_bytes,
      ...(k.webhook ? { webhook: k.webhook } : {}),
      ...(k.cache_scope ? { cacheScope: k.cache_scope } : {}),
      ...(k.stop_rules
        ? {
            stopRules: {
              maxErrorRate: k.stop_rules.max_error_rate,
              maxCost: k.stop_rules.max_cost,
              maxOutputTokens: k.stop_rules.max_output_tokens,
            },
          }
        : {}),
    });
  });
  if (problems.length > 0) throw new Error(problems.join("\n"));
  return keys;
}

/** The keys by owner, for what the control plane asks of a batch's key. */
export class KeyRing {
  private readonly byOwner: Map<string, ApiKey>;

  constructor(readonly keys: readonly ApiKey[]) {
    this.byOwner = new Map(keys.map((k) => [k.owner, k]));
  }

  of(owner: string | null | undefined): ApiKey | undefined {
    return owner ? this.byOwner.get(owner) : undefined;
  }

  /** What usage and metrics call an owner: its key's id (null: no key, the API is open). */
  idOf(owner: string | null | undefined): string | null {
    if (!owner) return null;
    return this.byOwner.get(owner)?.id ?? keyIdOfOwner(owner);
  }

  /**
   * Whose remembered answers an owner's requests share: the keys file's cache_scope where its key names one (shared
   * by every key naming it), else the owner's own; null: no key (the open API).
   */
  cacheScopeOf(owner: string | null | undefined): string | null {
    if (!owner) return null;
    const shared = this.byOwner.get(owner)?.cacheScope;
    return shared ? `shared:${shared}` : `owner:${owner}`;
  }

  /** The share weight of each owner whose key has one other than 1. */
  weights(): Record<string, number> {
    return Object.fromEntries(this.keys.filter((k) => k.weight !== 1).map((k) => [k.owner, k.weight]));
  }

  /** The key's limit on `model` (its own, else `*`), or undefined: none. */
  limitOf(owner: string | null | undefined, model: string): number | undefined {
    const limits = this.of(owner)?.limits;
    return limits ? (limits[model] ?? limits["*"]) : undefined;
  }
}
