// The files the compiled code reads next to itself: tsc copies only what it compiles, and the code
// finds these relative to its own location (dist/config/config.js -> dist/config/model_config.yaml).
// Usage: node scripts/copy-build-assets.mjs [outDir]   (default dist)
import { cpSync } from "node:fs";
import path from "node:path";

// postgres/migrations: the versioned SQL the distributed mode applies at start.
// engine/native: the patch whose hash names the patched engine's build (engine/load/native.ts).
export const ASSETS = ["package.json", "config/model_config.yaml", "api/console", "postgres/migrations", "engine/native"];

const outDir = process.argv[2] ?? "dist";
for (const file of ASSETS) cpSync(file, path.join(outDir, file), { recursive: true });
console.log(`copied ${ASSETS.length} assets into ${outDir}/`);
