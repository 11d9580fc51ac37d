// A keys file (KEYS_FILE) for tests: each key's secret made here, the file holding only its sha256.
import { writeFileSync } from "node:fs";
import path from "node:path";
import YAML from "yaml";
import { sha256Hex } from "../../config/keys.js";

export interface TestKey {
  id: string;
  admin?: boolean;
  weight?: number;
  limits?: Record<string, number>;
  fileStorageBytes?: number;
}

/** Writes `dir`/keys.yaml; returns its path and each key's Authorization header by id. */
export function writeKeysFile(dir: string, keys: TestKey[]): { file: string; auth: Record<string, Record<string, string>> } {
  const auth: Record<string, Record<string, string>> = {};
  const entries = keys.map((k) => {
    const secret = `sk-test-${k.id}-secret`;
    auth[k.id] = { authorization: `Bearer ${secret}` };
    return {
      id: k.id,
      sha256: sha256Hex(secret),
      ...(k.admin ? { admin: true } : {}),
      ...(k.weight ? { weight: k.weight } : {}),
      ...(k.limits ? { enqueued_token_limits: k.limits } : {}),
      ...(k.fileStorageBytes ? { file_storage_limit_bytes: k.fileStorageBytes } : {}),
    };
  });
  const file = path.join(dir, "keys.yaml");
  writeFileSync(file, YAML.stringify({ keys: entries }));
  return { file, auth };
}

/** GETs `path` with these headers; the status and the JSON body. */
export async function getJson(baseUrl: string, path: string, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  const res = await fetch(`${baseUrl}${path}`, { headers });
  return { status: res.status, body: await res.json() };
}

/** Sums what the batches' `usage` and `request_counts` say, per key id (`keyOf` names each batch's key). */
export function usageOf(batches: any[]): { input: number; output: number; cached: number; completed: number } {
  const sum = { input: 0, output: 0, cached: 0, completed: 0 };
  for (const b of batches) {
    sum.input += b.usage.input_tokens;
    sum.output += b.usage.output_tokens;
    sum.cached += b.usage.input_tokens_details.cached_tokens;
    sum.completed += b.request_counts.completed;
  }
  return sum;
}

/** Sums a usage page's completions results, per api_key_id. */
export function usageByKey(page: any): Map<string, { input: number; output: number; cached: number; completed: number }> {
  const out = new Map<string, { input: number; output: number; cached: number; completed: number }>();
  for (const bucket of page.data)
    for (const r of bucket.results) {
      const s = out.get(r.api_key_id) ?? { input: 0, output: 0, cached: 0, completed: 0 };
      s.input += r.input_tokens;
      s.output += r.output_tokens;
      s.cached += r.input_cached_tokens;
      s.completed += r.num_model_requests;
      out.set(r.api_key_id, s);
    }
  return out;
}
