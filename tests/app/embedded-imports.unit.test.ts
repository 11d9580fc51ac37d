// The embedded mode, the default, starts without PostgreSQL's client or S3's: the static imports of the server's
// start (app/main.ts, then app/service.ts) never reach them, so a start pays neither (pg alone is 60-70 ms of a
// core to import). The distributed mode imports them where it opens them. An import is counted unless it is type-only
// (`import type`, or every name in it `type`): counting too many can only fail this test, never pass it wrongly.
import { readFileSync } from "node:fs";
import path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../testkit/repo-root.js";

function runtimeSpecifiers(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(path.join(repoRoot, file), "utf8"), ts.ScriptTarget.ES2022);
  const found: string[] = [];
  for (const s of source.statements) {
    if (ts.isImportDeclaration(s)) {
      const clause = s.importClause;
      const named = clause?.namedBindings;
      const typeOnly =
        clause?.isTypeOnly || (clause && !clause.name && named && ts.isNamedImports(named) && named.elements.every((e) => e.isTypeOnly));
      if (!typeOnly) found.push((s.moduleSpecifier as ts.StringLiteral).text);
    } else if (ts.isExportDeclaration(s) && s.moduleSpecifier && !s.isTypeOnly) {
      found.push((s.moduleSpecifier as ts.StringLiteral).text);
    }
  }
  return found;
}

/** The repository's files and the packages the static imports from `entries` reach. */
function staticClosure(entries: string[]): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const todo = [...entries];
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    for (const spec of runtimeSpecifiers(file)) {
      if (spec.startsWith(".")) todo.push(path.posix.join(path.posix.dirname(file), spec).replace(/\.js$/, ".ts"));
      else if (!spec.startsWith("node:"))
        packages.add(
          spec
            .split("/")
            .slice(0, spec.startsWith("@") ? 2 : 1)
            .join("/"),
        );
    }
  }
  return { files, packages };
}

describe("the embedded mode's start", () => {
  it("imports neither PostgreSQL's client nor S3's", () => {
    const { files, packages } = staticClosure(["app/main.ts", "app/service.ts"]);
    expect(files.size).toBeGreaterThan(50);
    expect([...files].filter((f) => f.startsWith("postgres/") || f === "stores/s3-blob-store.ts")).toEqual([]);
    expect(packages).toContain("express");
    expect([...packages].filter((p) => p === "pg" || p.startsWith("@aws-sdk/"))).toEqual([]);
  });
});
