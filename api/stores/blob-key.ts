// What every BlobStore accepts as a key: relative, `/`-separated, no empty or `..` segment, so no key can reach
// outside the store's root (a folder, or a bucket prefix).

export function checkBlobKey(key: string): string {
  if (key === "" || key.startsWith("/") || key.split("/").some((part) => part === ".." || part === "" || part.includes("\\"))) {
    throw new Error(`invalid blob key '${key}'`);
  }
  return key;
}
