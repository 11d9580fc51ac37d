// Each figure is given once: the README's results are a summary of the measurement tables they link to, so every
// figure the README states must stand in the very row it names (a figure that appears elsewhere on the page, for
// another experiment, does not count), and a page rewritten without it fails here rather than leaving two stories.
// A link whose text is a figure, on any page, is held to the section it points at the same way.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../testkit/repo-root.js";
import { rowsLabelled, sectionOf } from "../helpers/markdown.js";

const read = (file: string) => readFileSync(path.join(repoRoot, file), "utf8");
/** A figure with its unit: 1.51×, 30.8 s, 0.22 ms, +118 MiB, 60,440. */
const FIGURE = /\+?\d[\d,]*(?:\.\d+)?(?:×| ?(?:ms|s|MiB|MB|GB)\b)?/g;
const figuresIn = (text: string) =>
  [...text.replaceAll("**", "").matchAll(FIGURE)].map((m) => m[0]).filter((f) => /\D/.test(f) || f.length > 2);

/** The figures a row marks as missing their goal: the figure just before "(missed)" or "(1.3: missed)". */
const missesIn = (row: string) => [...row.matchAll(/(\d[\d,.]*×?) \((?:[\d.]+: )?missed\)/g)].map((m) => m[1]);

interface Result {
  what: string;
  /** The measured cell, as "label: figures; label: figures". */
  segments: Array<{ label: string; text: string }>;
  page: string;
  anchor: string | undefined;
}

/** The README's Results table: each row's measured cell, split by the rows it names, and the section it links to. */
function resultRows(): Result[] {
  const readme = read("README.md");
  const start = readme.indexOf("## Results");
  const section = readme.slice(start, readme.indexOf("\n## ", start + 3));
  return [...section.matchAll(/^\| (.+?) \| (.+?) \| \[\w+\]\(([^)#]+)(?:#([^)]+))?\) \|$/gm)].map((m) => ({
    what: m[1],
    segments: m[2].split("; ").map((part) => {
      const colon = part.indexOf(": ");
      return { label: colon < 0 ? "" : part.slice(0, colon), text: part.slice(colon + 2) };
    }),
    page: m[3],
    anchor: m[4],
  }));
}

function docsPages(): string[] {
  return [
    "README.md",
    ...readdirSync(path.join(repoRoot, "docs"))
      .filter((f) => f.endsWith(".md"))
      .map((f) => `docs/${f}`),
  ];
}

describe("figures stated once", () => {
  it("finds the README's results, each measured figure after the label of its row", () => {
    const rows = resultRows();
    expect(rows.length).toBeGreaterThanOrEqual(4);
    expect(figuresIn("30.8 s against 46.5 s: **1.51×**; +118 MiB, 0.22 ms CPU, 0 of 60,440")).toEqual([
      "30.8 s",
      "46.5 s",
      "1.51×",
      "+118 MiB",
      "0.22 ms",
      "60,440",
    ]);
    for (const { what, segments } of rows) for (const s of segments) expect(s.label, `${what}: "${s.text}" names no row`).not.toBe("");
  });

  it("tells a row from its neighbours and finds a section's end", () => {
    const table = "| families-8: eight | 1.51× |\n| families-64: sixty-four | **1.29×** (1.3: missed) |\n";
    expect(rowsLabelled(table, "families-6")).toEqual([]);
    expect(rowsLabelled(table, "families-64")).toHaveLength(1);
    expect(missesIn(rowsLabelled(table, "families-64")[0])).toEqual(["1.29×"]);
    const page = "# P\n## A b\nx\n### c\ny\n## D\nz\n";
    expect(sectionOf(page, "a-b")).toBe("## A b\nx\n### c\ny\n");
    expect(sectionOf(page, "e")).toBeUndefined();
  });

  it.each(resultRows())("the README's result stands in the rows it names: $what", ({ segments, page, anchor }) => {
    const section = sectionOf(read(page), anchor);
    expect(section, `${page}#${anchor}`).toBeDefined();
    for (const { label, text } of segments) {
      const rows = rowsLabelled(section!, label);
      expect(rows, `one row labelled "${label}" in ${page}#${anchor ?? ""}`).toHaveLength(1);
      for (const figure of figuresIn(text)) expect(rows[0], `${figure} in the row "${label}" of ${page}`).toContain(figure);
    }
  });

  it.each(resultRows())("the README quotes each miss of the rows it names: $what", ({ segments, page, anchor }) => {
    const section = sectionOf(read(page), anchor)!;
    for (const { label, text } of segments) {
      const quoted = figuresIn(text);
      for (const miss of missesIn(rowsLabelled(section, label)[0] ?? "")) expect(quoted, `${label} missed ${miss}`).toContain(miss);
    }
  });

  it("quotes every row of a section whose goals it reports, misses included", () => {
    const labels = new Map<string, string[]>();
    for (const { page, anchor, segments } of resultRows())
      labels.set(`${page}#${anchor ?? ""}`, [...(labels.get(`${page}#${anchor ?? ""}`) ?? []), ...segments.map((s) => s.label)]);
    for (const [cited, named] of labels) {
      const [page, anchor] = cited.split("#");
      const section = sectionOf(read(page), anchor || undefined)!;
      const missing = [...section.matchAll(/^\|(.*)\|$/gm)]
        .map((m) => m[1].replaceAll("**", ""))
        .filter((row) => missesIn(row).length > 0)
        .map((row) => row.split("|")[0].trim())
        .filter((first) => !named.some((label) => rowsLabelled(`|${first}|`, label).length > 0));
      expect(missing, `${page}#${anchor}: rows with a missed goal the README leaves out`).toEqual([]);
    }
  });

  it("every ratio the README states is on the performance page", () => {
    const page = read("docs/performance.md");
    const ratios = [...read("README.md").matchAll(/\d+(?:\.\d+)?×/g)].map((m) => m[0]);
    expect(ratios.length).toBeGreaterThan(0);
    expect(ratios.filter((r) => !page.includes(r))).toEqual([]);
  });

  it.each(docsPages())("%s: a figure given as a link stands in the section it points at", (doc) => {
    const text = read(doc);
    const wrong: string[] = [];
    for (const m of text.matchAll(/\[([^\]]+)\]\(([^)#\s:]*\.md)#([^)\s]+)\)/g)) {
      const figures = figuresIn(m[1]);
      if (figures.length === 0) continue;
      const section = sectionOf(read(path.relative(repoRoot, path.resolve(path.dirname(path.join(repoRoot, doc)), m[2]))), m[3]);
      for (const figure of figures) if (!section?.replaceAll("**", "").includes(figure)) wrong.push(`${figure} → ${m[2]}#${m[3]}`);
    }
    expect(wrong).toEqual([]);
  });
});
