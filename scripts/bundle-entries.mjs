// The compiled entry points as bundles, written over their file-by-file build: a process started from one loads a few
// files rather than about 800 modules (node-llama-cpp alone is over 400), and each module cost Node's loader more than
// its code (a service's start to /ready took about 1.4 s of a core file by file, 0.95 s bundled).
// Usage: node scripts/bundle-entries.mjs [outDir]   (default dist), after the file-by-file build is in outDir.
//
// What a bundle holds: the product's own modules and node-llama-cpp with the ES modules it imports. Every other
// package stays an import of node_modules, as each of them may be reached by another package too (zod by
// zod-to-openapi), and a second copy of a module is a second copy of its classes and state.
//
// Each bundled module keeps its own `import.meta.url`: it is rewritten to the file the module was built from
// (outDir/config/config.js for config/config.ts, node_modules/node-llama-cpp/dist/... for node-llama-cpp's), so what
// the code finds beside itself (config, migrations, the console's page, node-llama-cpp's binaries) is where it was.
import { existsSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** The scripts a process is started from: the service, the offline runner, a dataset read's process. */
export const ENTRIES = ["app/main.ts", "runner/main.ts", "dataset-jobs/read-child.ts"];
/** The packages bundled with the product's code, with the ES modules they import. */
const BUNDLED = new Set(["node-llama-cpp"]);
/** Every output (entries and shared chunks) one folder below outDir, so one relative path fits a module anywhere. */
const CHUNKS = "chunks/[name]-[hash]";
/** node-llama-cpp's binary packages: found at run time, only the one that machine uses installed. */
const BINARIES = /^@node-llama-cpp\//;

const packageName = (specifier) =>
  specifier
    .split("/")
    .slice(0, specifier.startsWith("@") ? 2 : 1)
    .join("/");
const inNodeModules = (file) => file.split(path.sep).includes("node_modules");

/** Whether `file` is an ES module, as Node decides it: its extension, else its package's `type`. */
function isEsm(file) {
  if (file.endsWith(".mjs")) return true;
  if (!file.endsWith(".js")) return false;
  for (let dir = path.dirname(file); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const manifest = path.join(dir, "package.json");
    if (existsSync(manifest)) return JSON.parse(readFileSync(manifest, "utf8")).type === "module";
  }
  return false;
}

/** esbuild's plugin: which bare imports are bundled, and each module's own URL. */
function ownPlaces(outDir) {
  return {
    name: "own-places",
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, async (args) => {
        if (args.pluginData?.resolving || args.path.startsWith("node:")) return undefined;
        const fromPackage = inNodeModules(args.importer);
        if (!fromPackage && !BUNDLED.has(packageName(args.path))) return { path: args.path, external: true };
        const { resolveDir, kind, importer } = args;
        const found = await b.resolve(args.path, { resolveDir, kind, importer, pluginData: { resolving: true } });
        // Not installed here (another platform's binaries, electron): left to fail or succeed at run time, as before.
        if (found.errors.length > 0 || BINARIES.test(args.path)) return { path: args.path, external: true };
        if (found.external || isEsm(found.path)) return found;
        // A CommonJS package a bundled one imports, loaded from node_modules: by name where that finds the same
        // file, else by its path from the output (one nested in another package's node_modules).
        const fromOut = await b.resolve(args.path, { resolveDir: outDir, kind, pluginData: { resolving: true } });
        if (fromOut.path === found.path) return { path: args.path, external: true };
        return { path: path.posix.join("..", path.relative(outDir, found.path).split(path.sep).join("/")), external: true };
      });
      b.onLoad({ filter: /\.(ts|js|mjs)$/ }, async (args) => {
        const own = !inNodeModules(args.path);
        let contents = await readFile(args.path, "utf8");
        if (contents.includes("import.meta.url")) {
          const built = own ? path.join(outDir, path.relative(root, args.path).replace(/\.ts$/, ".js")) : args.path;
          const fromOutput = path.posix.join("..", path.relative(outDir, built).split(path.sep).join("/"));
          contents = contents.replaceAll("import.meta.url", `new URL(${JSON.stringify(fromOutput)}, import.meta.url).href`);
        }
        return { contents, loader: args.path.endsWith(".ts") ? "ts" : "js" };
      });
    },
  };
}

/** Bundles ENTRIES into `outDir` (absolute or from the repository's root) over its file-by-file build. */
export async function bundleEntries(outDir) {
  outDir = path.resolve(root, outDir);
  const { metafile } = await build({
    entryPoints: ENTRIES.map((e) => path.join(root, e)),
    outdir: outDir,
    outbase: root,
    absWorkingDir: root,
    chunkNames: CHUNKS,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    tsconfig: path.join(root, "tsconfig.build.json"),
    sourcemap: true,
    metafile: true,
    allowOverwrite: true,
    logLevel: "error",
    plugins: [ownPlaces(outDir)],
  });
  const deep = Object.keys(metafile.outputs).filter((o) => path.relative(outDir, path.resolve(root, o)).split(path.sep).length !== 2);
  if (deep.length > 0) throw new Error(`bundles must sit one folder below ${outDir}: ${deep.join(", ")}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const outDir = process.argv[2] ?? "dist";
  await bundleEntries(outDir);
  console.log(`bundled ${ENTRIES.length} entry points in ${outDir}/`);
}
