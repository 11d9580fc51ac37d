// The error catalogue against the code: every code the product's source raises (the code argument of its error
// classes and helpers, and every `code:` of an error entry it writes) is catalogued, every catalogued code occurs
// in the source, and docs/errors.md holds the catalogue's table as it is.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { toApiError } from "../../api/http/error-handler.js";
import type { Endpoint } from "../../openai/backend.js";
import { type CatalogueEntry, ERROR_CATALOGUE, errorsTable } from "../../openai/error-catalogue.js";
import { parse } from "../../sync/request.js";
import { readDocTable } from "../../testkit/doc-tables.js";
import { placedFolders } from "../../testkit/floors.js";
import { repoRoot } from "../../testkit/repo-root.js";

/** The product's folders: what tests, benches and tools share or run is not raised to a client. */
const NOT_PRODUCT = new Set(["tests", "bench", "chaos", "scripts", "testkit", "examples"]);

/** Which argument is the code, for each error class and helper that takes one. */
const CODE_ARGUMENT: Record<string, number> = {
  RequestError: 1,
  ApiError: 3,
  ControlError: 1,
  InvalidRequestError: 1,
  UnavailableError: 1,
  badRequest: 2,
};

/** zod's issue codes, written where a schema refines its input: not errors the service answers with. */
const ZOD_ISSUE_CODES = new Set(["custom"]);
/** An abort reason that writes no line: the batch is checkpointed and resumes (batches/reasons.ts). */
const NO_LINE = new Set(["shutdown"]);

function productSources(): string[] {
  return placedFolders()
    .filter((folder) => !NOT_PRODUCT.has(folder))
    .flatMap((folder) =>
      readdirSync(path.join(repoRoot, folder), { recursive: true })
        .map(String)
        .filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts") && !f.includes("node_modules"))
        .map((f) => path.join(folder, f)),
    );
}

/** Each code raised, with where. */
function raisedCodes(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const file of productSources()) {
    const source = ts.createSourceFile(file, readFileSync(path.join(repoRoot, file), "utf8"), ts.ScriptTarget.Latest, true);
    const note = (literal: ts.StringLiteral) => {
      const at = `${file}:${source.getLineAndCharacterOfPosition(literal.getStart()).line + 1}`;
      found.set(literal.text, [...(found.get(literal.text) ?? []), at]);
    };
    const visit = (node: ts.Node, parent?: string) => {
      if (ts.isClassDeclaration(node)) parent = node.heritageClauses?.[0]?.types[0]?.expression.getText(source);
      if ((ts.isNewExpression(node) || ts.isCallExpression(node)) && node.arguments) {
        const callee = node.expression.kind === ts.SyntaxKind.SuperKeyword ? parent : node.expression.getText(source).split(".").pop();
        const at = callee === undefined ? undefined : CODE_ARGUMENT[callee];
        const argument = at === undefined ? undefined : node.arguments[at];
        if (argument && ts.isStringLiteral(argument)) note(argument);
      }
      if (ts.isPropertyAssignment(node) && node.name.getText(source) === "code" && ts.isStringLiteral(node.initializer))
        note(node.initializer);
      ts.forEachChild(node, (child) => visit(child, parent));
    };
    visit(source);
  }
  return found;
}

describe("the error catalogue", () => {
  const raised = raisedCodes();

  it("holds every code the source raises", () => {
    expect(raised.size).toBeGreaterThan(40);
    const missing = [...raised]
      .filter(([code]) => !(code in ERROR_CATALOGUE) && !ZOD_ISSUE_CODES.has(code) && !NO_LINE.has(code))
      .map(([code, at]) => `${code} (${at.join(", ")})`);
    expect(missing, "add these to openai/error-catalogue.ts, then npm run docs:errors").toEqual([]);
  });

  it("holds no code the source never writes", () => {
    const text = productSources()
      .map((f) => readFileSync(path.join(repoRoot, f), "utf8"))
      .join("\n");
    const stale = Object.keys(ERROR_CATALOGUE).filter((code) => !text.includes(`"${code}"`));
    expect(stale).toEqual([]);
  });

  it("is what docs/errors.md shows", () => {
    expect(readDocTable("docs/errors.md", "errors"), "docs/errors.md is current: run npm run docs:errors").toBe(errorsTable());
  });

  it("gives each code a synchronous request is refused with the status and type that request gets", () => {
    const chat = { model: "m", messages: [{ role: "user", content: "hi" }] };
    const refusals: Array<[Endpoint, unknown, string]> = [
      ["/v1/chat/completions", {}, "missing_required_parameter"],
      ["/v1/messages", { model: "m", messages: [{ role: "user", content: "hi" }] }, "missing_required_parameter"],
      ["/v1/chat/completions", { ...chat, max_tokenz: 5 }, "unknown_parameter"],
      ["/v1/chat/completions", { ...chat, temperature: 5 }, "invalid_request"],
      ["/v1/chat/completions", { ...chat, stream: "yes" }, "invalid_type"],
      ["/v1/embeddings", { model: "m", input: "x", stream: true }, "unsupported_value"],
    ];
    for (const [endpoint, body, code] of refusals) {
      let answer: ReturnType<typeof toApiError>;
      try {
        parse(endpoint, body, false);
      } catch (err) {
        answer = toApiError(err, { maxFileBytes: 0 });
      }
      expect(answer!, `${endpoint} ${JSON.stringify(body)}`).toMatchObject({ status: 400, code });
      const entry: CatalogueEntry = ERROR_CATALOGUE[code as keyof typeof ERROR_CATALOGUE];
      expect(entry.places, code).toContain("http");
      expect([entry.status, entry.type], code).toEqual([answer!.status, answer!.type]);
    }
    expect(errorsTable()).toMatch(/\| `missing_required_parameter` \| answer, error line \| 400 \| invalid_request_error \|/);
  });
});
