// The house plan as data: which top-level folders sit on which floor, and the check that every relative import
// points down. A folder may import its own files and any folder on a lower floor; folders on one floor are
// siblings and import each other not at all. Read by tests/floors.unit.test.ts.
import { readFileSync } from "node:fs";
import path from "node:path";
import { repoFiles, repoRoot } from "./repo-root.js";

/** Top to bottom. */
export const FLOORS: readonly (readonly string[])[] = [
  ["tests"],
  ["bench", "chaos", "examples", "scripts"],
  ["runner", "testkit"],
  ["app"],
  ["api", "batches", "sync", "dataset-jobs", "uploads", "embedded", "postgres"],
  ["tenancy"],
  ["state"],
  ["domain"],
  ["stores", "metrics", "datasets"],
  ["backends", "pipeline"],
  ["engine", "upstream", "cache"],
  ["parse"],
  ["anthropic"],
  ["openai"],
  ["config"],
];

/** A floor number per folder, 0 the lowest. */
const floorOf = new Map(FLOORS.flatMap((folders, i) => folders.map((f) => [f, FLOORS.length - 1 - i] as const)));

export interface ImportEdge {
  /** Files relative to the repository root, `/`-separated. */
  from: string;
  to: string;
}

const topFolder = (file: string) => (file.includes("/") ? file.slice(0, file.indexOf("/")) : ".");

/**
 * Imports that break the plan: up a floor, across a floor, or from or to a folder the plan does not place. The
 * root's own files (vitest.config.ts) configure the tools and stand above the house: they may import any floor, and
 * nothing imports them.
 */
export function misplacedImports(edges: readonly ImportEdge[]): string[] {
  const out: string[] = [];
  for (const { from, to } of edges) {
    const [a, b] = [topFolder(from), topFolder(to)];
    if (a === b || a === ".") continue;
    const [fa, fb] = [floorOf.get(a), floorOf.get(b)];
    if (fa === undefined || fb === undefined) out.push(`${from} -> ${to}: ${fa === undefined ? a : b}/ has no floor`);
    else if (fa === fb) out.push(`${from} -> ${to}: ${a}/ and ${b}/ are siblings`);
    else if (fa < fb) out.push(`${from} -> ${to}: ${b}/ is above ${a}/`);
  }
  return out;
}

const SOURCE = /\.(ts|mts|mjs)$/;
/** Static and dynamic imports and re-exports with a relative specifier; the type-only `import("...")` form too. */
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s*)["'](\.{1,2}\/[^"']+)["']/gm;

/** Every relative import of the repository's source files (the root's own files count as the folder "."). */
export function importEdges(): ImportEdge[] {
  return repoFiles("", (name) => SOURCE.test(name) && !name.endsWith(".d.ts")).flatMap((from) =>
    [...readFileSync(path.join(repoRoot, from), "utf8").matchAll(SPECIFIER)].map((m) => ({
      from,
      to: path.posix.normalize(path.posix.join(path.posix.dirname(from), m[1])),
    })),
  );
}

/** The folders the plan places, top to bottom. */
export const placedFolders = () => FLOORS.flat();
