// docs/api.md's route table is the OpenAPI document's: every documented route once, each with the file that serves
// it, and the page current (npm run docs:api).
import { existsSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { buildOpenApiDocument } from "../../api/openapi.js";
import { routeTable } from "../../api/route-table.js";
import { readDocTable } from "../../testkit/doc-tables.js";
import { repoRoot } from "../../testkit/repo-root.js";

const table = routeTable();
const rows = table.split("\n").slice(2);

describe("the route table", () => {
  it("lists every route of the OpenAPI document once", () => {
    const doc = buildOpenApiDocument() as { paths: Record<string, Record<string, unknown>> };
    const routes = Object.entries(doc.paths).flatMap(([p, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${p}`));
    expect(routes.length).toBeGreaterThan(50);
    const listed = rows.map((r) => /^\| `([A-Z]+ [^`]+)`/.exec(r)?.[1]);
    expect([...listed].sort()).toEqual([...routes].sort());
  });

  it("names a file that exists for each route, and the schemas by their names", () => {
    for (const row of rows) {
      const file = /\]\(\.\.\/([^)]+)\) \|$/.exec(row)?.[1];
      expect(file && existsSync(path.join(repoRoot, file)), row).toBe(true);
    }
    expect(table).toMatch(
      /\| `POST \/v1\/batches` \| Create a batch \| JSON \| `Batch` \| \[`batches\.ts`\]\(\.\.\/api\/routes\/batches\.ts\) \|/,
    );
    expect(table).toMatch(/\| `GET \/metrics` .* \[`metrics\.ts`\]/);
  });

  it("is the one on docs/api.md", () => {
    expect(readDocTable("docs/api.md", "routes"), "docs/api.md is stale: run npm run docs:api").toBe(table);
  });
});
