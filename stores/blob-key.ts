// What every BlobStore accepts as a key: relative, `/`-separated, no empty or `..` segment, so no key can reach
// outside the store's root (a folder, or a bucket prefix).

export function checkBlobKey(key: string): string {
  if (key === "" || key.startsWith("/") || key.split("/").some((part) => part === ".." || part === "" || part.includes("\\"))) {
    throw new Error(`invalid blob key '${key}'`);
  }
  return key;
}

/** A prefix given as "a/b/": the key of its folder ("a/b"), checked as a key. */
export function prefixKey(prefix: string): string {
  if (!prefix.endsWith("/")) throw new Error(`invalid blob prefix '${prefix}': it must end with "/"`);
  return checkBlobKey(prefix.slice(0, -1));
}
