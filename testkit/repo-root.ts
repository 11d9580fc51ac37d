// The repository's root, for tests, benches and scripts that read files by their place in the repository.
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root, wherever the checkout is (../shared sits beside it). */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
