// Each folder README lists exactly its files, with their opening comments' first sentences, and states what the
// folder imports; the floors picture is the plan's. All written by npm run docs:readmes, so a stale one fails here.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { readDocTable } from "../../testkit/doc-tables.js";
import { FLOORS, importEdges } from "../../testkit/floors.js";
import {
  filesTable,
  firstSentence,
  floorsPicture,
  folderFiles,
  importsLine,
  listedFolders,
  openingComment,
  readmeOf,
} from "../../testkit/folder-readmes.js";
import { repoRoot } from "../../testkit/repo-root.js";

const FIX = "run npm run docs:readmes";
const edges = importEdges();

describe("folder READMEs", () => {
  it.each(listedFolders())("%s lists its files and its imports", (folder) => {
    const { page, table } = readmeOf(folder);
    expect(readDocTable(page, table), `${page} is stale: ${FIX}`).toBe(filesTable(folder));
    if (!folder.includes("/")) expect(readDocTable(page, "imports"), `${page} is stale: ${FIX}`).toBe(importsLine(folder, edges));
  });

  it("every listed file opens with a comment that says what it is", () => {
    const bare = listedFolders().flatMap((folder) =>
      folderFiles(folder)
        .filter((file) => !openingComment(readFileSync(path.join(repoRoot, folder, file), "utf8")))
        .map((file) => `${folder}/${file}`),
    );
    expect(bare, "give each an opening comment").toEqual([]);
  });

  it("draws every floor of the plan, in the README and the architecture page", () => {
    const picture = floorsPicture();
    for (const folder of FLOORS.flat()) expect(picture).toMatch(new RegExp(`^ ${folder}/ `, "m"));
    expect(picture.split("\n").filter((line) => /^ ─+$/.test(line))).toHaveLength(FLOORS.length - 1);
    expect(readDocTable("README.md", "floors"), FIX).toBe(picture);
    expect(readDocTable("docs/architecture.md", "floors"), FIX).toBe(picture);
  });
});

describe("opening comments", () => {
  it("reads line comments, JSDoc, docstrings and shell comments after a shebang", () => {
    expect(openingComment("// A thing.\n// More.\nimport x;")).toBe("A thing. More.");
    expect(openingComment("// @ts-check\n// The page.\n")).toBe("The page.");
    expect(openingComment("#!/usr/bin/env bash\n# Builds it.\nset -e")).toBe("Builds it.");
    expect(openingComment('"""Validates.\n\nUsage: x"""\nimport json')).toBe("Validates. Usage: x");
    expect(openingComment("/**\n * Doc.\n */\nexport {}")).toBe("Doc.");
    expect(openingComment("import x from 'y';\n// Later.")).toBe("");
  });

  it("takes the first sentence, not an abbreviation's stop nor a file name's dot", () => {
    expect(firstSentence("Tokens, e.g. the BOS one. Then more.")).toBe("Tokens, e.g. the BOS one.");
    expect(firstSentence("Reads config.ts and app.ts here. Next.")).toBe("Reads config.ts and app.ts here.");
    expect(firstSentence("No stop at all")).toBe("No stop at all");
  });

  it("finds the files of nested folders and leaves tests and declarations out", () => {
    expect(folderFiles("engine")).toContain("gguf/writer.ts");
    expect(folderFiles("api")).toContain("console/console.js");
    expect(folderFiles("api").some((f) => f.endsWith(".d.ts") || f.endsWith(".test.ts"))).toBe(false);
  });
});
