// The repository's root and its files, for tests, benches and scripts that read files by their place in the
// repository.
import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root, wherever the checkout is (../shared sits beside it). */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Never walked: dependencies, build output, bench results, Python's caches (and every dot-named entry). */
const SKIP = new Set(["node_modules", "dist", "results", "__pycache__"]);

/** The files under `dir` (relative to the root, `/`-separated, "" for the root itself) whose name `keep` takes. */
export function repoFiles(dir: string, keep: (name: string) => boolean): string[] {
  return readdirSync(path.join(repoRoot, dir), { withFileTypes: true }).flatMap((e) => {
    if (e.name.startsWith(".") || SKIP.has(e.name)) return [];
    const rel = dir ? `${dir}/${e.name}` : e.name;
    if (e.isDirectory()) return repoFiles(rel, keep);
    return keep(e.name) ? [rel] : [];
  });
}
