// A batch's `metadata.cache`: "off" runs every line even where an answer is remembered or repeated (the result
// cache, docs/cache.md), "on" is the default; any other value is refused at create, naming the key.
import { InvalidRequestError } from "../domain/errors.js";

const CHOICES = ["on", "off"];

export function checkCacheMetadata(metadata: Readonly<Record<string, string>> | null | undefined): void {
  const v = metadata?.cache;
  if (v === undefined || CHOICES.includes(v)) return;
  throw new InvalidRequestError(
    `Invalid 'metadata.cache': ${JSON.stringify(v)} is not "on" or "off" (off: every line is computed, none read from the result cache).`,
    "invalid_metadata",
    "metadata.cache",
  );
}
