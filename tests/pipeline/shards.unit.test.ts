// planShards: whole lines by byte range, SHARD_SIZE requests each, whatever the line endings and sizes.
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { oneShard, planShards } from "../../pipeline/shards.js";
import { tempDir } from "../helpers/scratch.js";

const dir = tempDir("obi-shards");
function file(content: string | Buffer): string {
  const p = path.join(dir, `f-${Math.random().toString(36).slice(2)}.jsonl`);
  writeFileSync(p, content);
  return p;
}

describe("planShards", () => {
  it("cuts after every n requests, on line ends, covering every byte once", async () => {
    const lines = Array.from({ length: 25 }, (_, i) => JSON.stringify({ custom_id: `r-${i}`, text: "é".repeat(i * 300) }));
    const p = file(`${lines.join("\r\n")}\r\n\n`);
    const shards = await planShards(p, 10);
    expect(shards.map((s) => s.total)).toEqual([10, 10, 5]);
    const bytes = readFileSync(p);
    expect(shards[0].byteStart).toBe(0);
    for (let i = 1; i < shards.length; i++) expect(shards[i].byteStart).toBe(shards[i - 1].byteEnd);
    expect(shards.at(-1)!.byteEnd).toBe(bytes.length);
    const back = shards.flatMap((s) =>
      bytes
        .subarray(s.byteStart, s.byteEnd)
        .toString("utf8")
        .split(/\r?\n/)
        .filter((l) => l.trim() !== ""),
    );
    expect(back).toEqual(lines);
  });

  it("handles a last line without its newline, an exact multiple, and trailing blank lines", async () => {
    expect(await planShards(file('{"a":1}\n{"a":2}'), 1)).toEqual([
      { byteStart: 0, byteEnd: 8, total: 1 },
      { byteStart: 8, byteEnd: 15, total: 1 },
    ]);
    // The blank tail joins the last shard rather than making an empty one.
    expect(await planShards(file('{"a":1}\n{"a":2}\n\n  \n'), 2)).toEqual([{ byteStart: 0, byteEnd: 20, total: 2 }]);
    expect(await planShards(file(""), 5)).toEqual([]);
  });

  it("plans one shard from the counts as the pass plans a file whose requests all fit in one", async () => {
    const text = '{"a":1}\n\n{"a":2}\n  \n';
    const p = file(text);
    const whole = oneShard({ total: 2, bytes: Buffer.byteLength(text) });
    expect(await planShards(p, 2)).toEqual([whole]);
    expect(await planShards(p, 5)).toEqual([whole]);
    expect(await planShards(p, 1)).toEqual([
      { byteStart: 0, byteEnd: 8, total: 1 },
      { byteStart: 8, byteEnd: whole.byteEnd, total: 1 },
    ]);
  });
});
