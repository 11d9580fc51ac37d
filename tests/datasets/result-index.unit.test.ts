// Finding each row's result line: ids as any server writes them, lines cut between the reader's chunks, and the
// later line of a row winning. Each found range is checked to hold exactly that line.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { locate, NONE } from "../../datasets/result-index.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("result-index");
const rowOf = (id: string) => (/^row-(\d+)$/.exec(id) ? Number(id.slice(4)) : undefined);

function lineAt(file: string, at: Awaited<ReturnType<typeof locate>>, n: number): string {
  const bytes = readFileSync(file);
  return bytes.subarray(at.start[n], at.start[n] + at.length[n]).toString("utf8");
}

describe("locate", () => {
  it("finds ids written compactly, with spaces, escaped, or past the first bytes, and skips lines without one", async () => {
    const lines = [
      '{"custom_id":"row-1","response":{}}',
      '{"id": "x", "custom_id" : "row-2", "response": {}}',
      '{"custom_id":"row\\u002d3"}',
      "",
      '{"response":{"custom_id":"not a key of ours"}}',
      `{"pad":"${"p".repeat(600)}","custom_id":"row-4"}\r`,
      '{"error":{"message":"no id here"}}',
      '{"custom_id":"row-9999"}',
      '{"custom_id":"row-5"}',
    ];
    const file = await scratch.write(lines.join("\n"));
    const at = await locate([file], 5, rowOf);
    expect([...at.file.slice(1)]).toEqual([0, 0, 0, 0, 0]);
    expect(lineAt(file, at, 1)).toBe(lines[0]);
    expect(lineAt(file, at, 2)).toBe(lines[1]);
    expect(lineAt(file, at, 3)).toBe(lines[2]);
    expect(lineAt(file, at, 4)).toBe(lines[5]);
    // The last line has no newline after it.
    expect(lineAt(file, at, 5)).toBe(lines[8]);
  });

  it("reads lines cut between chunks whole, and a later file's line of a row wins", async () => {
    // Lines of about 300 KiB: several fall across the reader's 1 MiB chunks, one is longer than a chunk.
    const long = (n: number, size: number) => JSON.stringify({ custom_id: `row-${n}`, body: "x".repeat(size) });
    const lines = [1, 2, 3, 4, 5, 6, 7].map((n) => long(n, n === 4 ? 1_500_000 : 300_000));
    const output = await scratch.write(`${lines.join("\n")}\n`);
    const errors = await scratch.write(`${JSON.stringify({ custom_id: "row-2", error: { code: "x" } })}\n`);
    const at = await locate([output, errors, `${output}.missing`], 8, rowOf);
    for (const n of [1, 3, 4, 5, 6, 7]) expect(lineAt(output, at, n)).toBe(lines[n - 1]);
    expect(at.file[2]).toBe(1);
    expect(JSON.parse(lineAt(errors, at, 2)).error.code).toBe("x");
    expect(at.file[8]).toBe(NONE);
  });
});
