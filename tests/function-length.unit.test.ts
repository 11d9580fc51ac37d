// No function of the product is over 80 lines, read from the syntax trees (testkit/function-length.ts): a longer one
// is split into pieces that each do one job, or a comment right above it starting `// one piece:` says why it must
// stay whole.
import { describe, expect, it } from "vitest";
import { placedFolders } from "../testkit/floors.js";
import { functionSpans, ONE_PIECE, repoFunctionSpans } from "../testkit/function-length.js";
import { repoFiles } from "../testkit/repo-root.js";

const MAX_LINES = 80;

/**
 * Held to the bar: every placed folder but tests/, bench/ and chaos/. scripts/, examples/ and testkit/ are under it
 * already and are read as the product is (a newcomer reads them so). bench/ and chaos/ are not: their campaigns and
 * report tables are long scripts run by hand, outside the service, and are left for their own change.
 */
const NOT_HELD = new Set(["tests", "bench", "chaos"]);

const heldFiles = () =>
  placedFolders()
    .filter((folder) => !NOT_HELD.has(folder))
    .flatMap((folder) => repoFiles(folder, (name) => /\.(ts|mts|mjs|js)$/.test(name) && !name.endsWith(".d.ts")));

describe("function length", () => {
  it(`finds no function over ${MAX_LINES} lines in the product without a reason to keep it whole`, () => {
    const files = heldFiles();
    expect(files.length).toBeGreaterThan(300);
    const spans = repoFunctionSpans(files);
    expect(spans.length).toBeGreaterThan(3000);
    const long = spans.filter((s) => s.lines > MAX_LINES && !s.onePiece).map((s) => `${s.file}:${s.line} ${s.name}: ${s.lines} lines`);
    expect(long, `split these, or say above one why it must stay whole with "${ONE_PIECE} <why>"`).toEqual([]);
  });

  it("counts each kind of function, nested ones inside their outer one's length, and reads the marker", () => {
    const body = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join("\n");
    const text = [
      "export function outer() {", // 1
      "  const inner = () => {", // 2
      body(3), // 3-5
      "  };", // 6
      "}", // 7
      "class Box {", // 8
      "  method() {", // 9
      "    return 1;", // 10
      "  }", // 11
      "}", // 12
      `${ONE_PIECE} a flat table`, // 13
      "const table = function () {", // 14
      "  return 2;", // 15
      "};", // 16
      'app.get("/x", async (req, res) => {', // 17
      "  res.end();", // 18
      "});", // 19
    ].join("\n");
    const spans = functionSpans("x.ts", text).map(({ line, name, lines, onePiece }) => ({ line, name, lines, onePiece }));
    expect(spans).toEqual([
      { line: 1, name: "outer", lines: 7, onePiece: false },
      { line: 2, name: "inner", lines: 5, onePiece: false },
      { line: 9, name: "Box.method", lines: 3, onePiece: false },
      { line: 14, name: "table", lines: 3, onePiece: true },
      { line: 17, name: "(callback of app.get /x)", lines: 3, onePiece: false },
    ]);
  });
});
