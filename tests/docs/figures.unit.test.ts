// Each figure is given once: the README's results are a summary of the pages they link to, so every figure the
// README states must stand on its page, and a page rewritten without it fails here rather than leaving two stories.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../testkit/repo-root.js";

const read = (file: string) => readFileSync(path.join(repoRoot, file), "utf8");
/** A figure with its unit: 1.51×, 30.8 s, 0.22 ms, +118 MiB, 60,440. */
const FIGURE = /\+?\d[\d,]*(?:\.\d+)?(?:×| ?(?:ms|s|MiB|MB|GB)\b)?/g;
const figuresIn = (text: string) =>
  [...text.replaceAll("**", "").matchAll(FIGURE)].map((m) => m[0]).filter((f) => /\D/.test(f) || f.length > 2);

/** The README's Results table: each row's measured cell and the page it links to. */
function resultRows(): Array<{ what: string; measured: string; page: string }> {
  const readme = read("README.md");
  const section = readme.slice(readme.indexOf("## Results"), readme.indexOf("\n## ", readme.indexOf("## Results") + 3));
  return [...section.matchAll(/^\| (.+?) \| (.+?) \| \[\w+\]\(([^)]+)\) \|$/gm)].map((m) => ({ what: m[1], measured: m[2], page: m[3] }));
}

describe("figures stated once", () => {
  it("finds the README's results and their figures", () => {
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
  });

  it.each(resultRows())("the README's result stands on its page: $what", ({ measured, page }) => {
    const text = read(page).replaceAll("**", "");
    for (const figure of figuresIn(measured)) expect(text, `${figure} on ${page}`).toContain(figure);
  });

  it("every ratio the README states is on the performance page", () => {
    const page = read("docs/performance.md");
    const ratios = [...read("README.md").matchAll(/\d+(?:\.\d+)?×/g)].map((m) => m[0]);
    expect(ratios.length).toBeGreaterThan(0);
    expect(ratios.filter((r) => !page.includes(r))).toEqual([]);
  });

  it("quotes the misses beside the goals met: a table it quotes from is quoted whole, each miss by its own figure", () => {
    const readme = read("README.md").replaceAll("**", "");
    const quoted = new Set([...readme.matchAll(/\d+\.\d+(?=×)/g)].map((m) => m[0]));
    const ranges = [...readme.matchAll(/(\d+\.\d+)–(\d+\.\d+)×/g)].map((m) => [Number(m[1]), Number(m[2])]);
    const inRange = (r: string) => ranges.some(([lo, hi]) => Number(r) >= lo && Number(r) <= hi);
    // Each table: a run of lines that begin with "|".
    const tables = [
      ...read("docs/performance.md")
        .replaceAll("**", "")
        .matchAll(/(?:^\|.*\n)+/gm),
    ].map((m) => m[0]);
    // A table is the README's source when it holds a time the README quotes (ratios alike recur between tables).
    const times = new Set([...readme.matchAll(/\d+\.\d+ s\b/g)].map((m) => m[0]));
    const sources = tables.filter((t) => [...t.matchAll(/\d+\.\d+ s\b/g)].some((m) => times.has(m[0])));
    expect(sources.length).toBeGreaterThan(0);
    for (const table of sources) {
      const ratios = [...table.matchAll(/\d+\.\d+(?=×)/g)].map((m) => m[0]);
      expect(ratios.filter((r) => !quoted.has(r) && !inRange(r))).toEqual([]);
      const misses = [...table.matchAll(/(\d+\.\d+)× \([\d.]+: missed\)/g)].map((m) => m[1]);
      expect(misses.length).toBeGreaterThan(0);
      expect(misses.filter((r) => !quoted.has(r))).toEqual([]);
    }
  });
});
