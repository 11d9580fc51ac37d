import { createHash } from "node:crypto";

/**
 * The owner of every object is a hash of the API key that created it, so keys are never stored and one key's files
 * and batches are invisible to another: the first 32 hex digits of the key's sha256.
 */
export function ownerOf(apiKey: string): string {
  return createHash("sha256").update(apiKey, "utf8").digest("hex").slice(0, 32);
}
