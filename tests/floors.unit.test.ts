// The floors read top to bottom (testkit/floors.ts): no folder imports one above it or a sibling, every source
// folder has a floor and a README saying what it holds, and only app/ builds the control plane.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { FLOORS, importEdges, misplacedImports, placedFolders } from "../testkit/floors.js";
import { repoRoot } from "../testkit/repo-root.js";

const sourceFolders = () =>
  readdirSync(repoRoot, { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith(".") && !["node_modules", "dist", "docs", "docker"].includes(e.name))
    .map((e) => e.name)
    .filter((d) => readdirSync(path.join(repoRoot, d), { recursive: true }).some((f) => /\.(ts|mts|mjs)$/.test(String(f))));

describe("the house plan", () => {
  it("has no import that points up a floor or across to a sibling", () => {
    const edges = importEdges();
    expect(edges.length).toBeGreaterThan(500);
    expect(misplacedImports(edges)).toEqual([]);
  });

  it("would fail on a back-arrow, a sibling import and a folder with no floor, and lets the root's config import below", () => {
    expect(misplacedImports([{ from: "engine/pool/pool.ts", to: "api/errors.js" }])).toEqual([
      "engine/pool/pool.ts -> api/errors.js: api/ is above engine/",
    ]);
    expect(misplacedImports([{ from: "api/routes/x.ts", to: "batches/worker.js" }])).toEqual([
      "api/routes/x.ts -> batches/worker.js: api/ and batches/ are siblings",
    ]);
    expect(misplacedImports([{ from: "newfolder/a.ts", to: "openai/backend.js" }])).toEqual([
      "newfolder/a.ts -> openai/backend.js: newfolder/ has no floor",
    ]);
    expect(misplacedImports([{ from: "testkit/x.ts", to: "vitest.config.js" }])).toEqual([
      "testkit/x.ts -> vitest.config.js: ./ has no floor",
    ]);
    expect(
      misplacedImports([
        { from: "vitest.config.ts", to: "testkit/test-order.js" },
        { from: "app/service.ts", to: "domain/ports.js" },
        { from: "api/x.ts", to: "api/y.js" },
      ]),
    ).toEqual([]);
  });

  it("finds the real imports it checks (static, dynamic and re-exports)", () => {
    const edges = importEdges();
    const has = (from: string, to: string) => edges.some((e) => e.from === from && e.to === to);
    expect(has("app/service.ts", "app/control-plane.js")).toBe(true);
    expect(has("testkit/model.ts", "engine/load/generated-model.js")).toBe(true);
    expect(has("domain/errors.ts", "stores/errors.js")).toBe(true);
  });

  it("places every source folder on a floor, each with a README saying what it holds and imports", () => {
    const placed = new Set(placedFolders());
    for (const folder of sourceFolders()) expect(placed.has(folder), `${folder}/ has a floor`).toBe(true);
    for (const folder of placedFolders().filter((f) => f !== "tests")) {
      const readme = path.join(repoRoot, folder, "README.md");
      expect(existsSync(readme), `${folder}/README.md`).toBe(true);
      expect(readFileSync(readme, "utf8"), `${folder}/README.md says what it imports`).toMatch(/^\*\*Imports\*\* /m);
    }
    expect(FLOORS.flat().length).toBe(new Set(FLOORS.flat()).size);
  });

  it("builds the control plane and the service only in app/", () => {
    const builders = /\bnew (ClusterWorker|Maintenance|ClusterBatchService|ClusterStatus)\(|\b(buildControlPlane|buildService)\(/;
    const offenders = placedFolders()
      .filter((f) => !["app", "tests", "testkit", "bench", "chaos"].includes(f))
      .flatMap((folder) =>
        readdirSync(path.join(repoRoot, folder), { recursive: true })
          .map(String)
          .filter((f) => /\.ts$/.test(f))
          .filter((f) => builders.test(readFileSync(path.join(repoRoot, folder, f), "utf8")))
          .map((f) => `${folder}/${f}`),
      );
    expect(offenders).toEqual([]);
  });
});
