import { readFile } from "node:fs/promises";
import { Readable } from "node:stream";
import { describe, expect, it, vi } from "vitest";
import { type JsonlLine, openJsonlAppender, readCompleteJsonLines, readJsonlLines } from "../../pipeline/jsonl.js";
import { scratchDir } from "../helpers/scratch.js";

const scratch = scratchDir("jsonl");

async function lines(path: string, opts?: Parameters<typeof readJsonlLines>[1]): Promise<JsonlLine[]> {
  const out: JsonlLine[] = [];
  for await (const l of readJsonlLines(path, opts)) out.push(l);
  return out;
}

describe("readJsonlLines", () => {
  it("numbers lines from 1 and counts bytes without the terminator", async () => {
    const p = await scratch.write('{"a":1}\n{"b":"é"}\n');
    expect(await lines(p)).toEqual([
      { lineNo: 1, text: '{"a":1}', bytes: 7, start: 0, end: 7 },
      { lineNo: 2, text: '{"b":"é"}', bytes: 10, start: 8, end: 18 },
    ]);
  });

  it("says where each line's raw bytes lie, CR and BOM included, across chunk boundaries", async () => {
    const raw = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":1}\r\n\n{"b":"é"}\r\nlast')]);
    const p = await scratch.write(raw);
    const got = await lines(p, { chunkBytes: 3 });
    expect(got.map((l) => raw.subarray(l.start, l.end).toString("utf8"))).toEqual(['\uFEFF{"a":1}\r', "", '{"b":"é"}\r', "last"]);
  });

  it("strips CRLF and yields a last line without a final newline", async () => {
    const p = await scratch.write("a\r\nb\r\nc");
    expect((await lines(p)).map((l) => [l.lineNo, l.text, l.bytes])).toEqual([
      [1, "a", 1],
      [2, "b", 1],
      [3, "c", 1],
    ]);
  });

  it("keeps blank lines (they are the validator's business) but not the empty tail after the last newline", async () => {
    const p = await scratch.write("a\n\nb\n\n");
    expect((await lines(p)).map((l) => l.text)).toEqual(["a", "", "b", ""]);
  });

  it("reads an empty file as no lines and drops a UTF-8 BOM", async () => {
    expect(await lines(await scratch.write(""))).toEqual([]);
    const p = await scratch.write(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from("x\ny")]));
    expect((await lines(p)).map((l) => l.text)).toEqual(["x", "y"]);
  });

  it("decodes multi-byte characters cut by a chunk boundary", async () => {
    const text = "ü€😀".repeat(50);
    const p = await scratch.write(`${text}\n${text}`);
    const got = await lines(p, { chunkBytes: 7 });
    expect(got.map((l) => l.text)).toEqual([text, text]);
    expect(got[0].bytes).toBe(Buffer.byteLength(text));
  });

  it("drops the text of an overlong line, reports its full size, and goes on", async () => {
    const long = "x".repeat(5000);
    const p = await scratch.write(`short\n${long}\r\nafter\n${long}`);
    const got = await lines(p, { maxLineBytes: 100, chunkBytes: 64 });
    expect(got).toEqual([
      { lineNo: 1, text: "short", bytes: 5, start: 0, end: 5 },
      { lineNo: 2, text: "", bytes: 5000, tooLong: true, start: 6, end: 5007 },
      { lineNo: 3, text: "after", bytes: 5, start: 5008, end: 5013 },
      { lineNo: 4, text: "", bytes: 5000, tooLong: true, start: 5014, end: 10014 },
    ]);
  });

  it("a line of exactly maxLineBytes passes, with or without CR", async () => {
    const p = await scratch.write("abcd\r\nabcde\nabcd");
    const got = await lines(p, { maxLineBytes: 4, chunkBytes: 2 });
    expect(got.map((l) => [l.text, l.bytes, l.tooLong ?? false])).toEqual([
      ["abcd", 4, false],
      ["", 5, true],
      ["abcd", 4, false],
    ]);
  });

  it("rejects for a missing file", async () => {
    await expect(lines(await scratch.file())).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("stops reading when the consumer stops", async () => {
    const p = await scratch.write("a\nb\nc\n");
    const gen = readJsonlLines(p);
    expect((await gen.next()).value?.text).toBe("a");
    await gen.return(undefined);
    expect((await gen.next()).done).toBe(true);
  });
});

describe("openJsonlAppender", () => {
  it("appends one JSON object per line after what is there", async () => {
    const p = await scratch.write('{"old":true}\n');
    const w = await openJsonlAppender(p);
    await w.append({ a: 1 });
    await w.append({ s: "line\nbreak" });
    await w.close();
    expect(await readFile(p, "utf8")).toBe('{"old":true}\n{"a":1}\n{"s":"line\\nbreak"}\n');
  });

  it("creates the file, and survives many appends without waiting between them", async () => {
    const p = await scratch.file();
    const w = await openJsonlAppender(p);
    const big = "y".repeat(10_000);
    await Promise.all(Array.from({ length: 500 }, (_, i) => w.append({ i, big })));
    await w.close();
    const got = (await readFile(p, "utf8"))
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l).i);
    expect(got).toEqual(Array.from({ length: 500 }, (_, i) => i));
  });

  it("writes a turn's lines together and in order, without waiting for a sync or a close; a sync waits for all", async () => {
    const p = await scratch.file();
    const w = await openJsonlAppender(p);
    for (let i = 0; i < 3; i++) void w.append({ i });
    await w.sync();
    expect(await readFile(p, "utf8")).toBe('{"i":0}\n{"i":1}\n{"i":2}\n');
    await w.append({ i: 3 });
    await vi.waitFor(async () => expect(await readFile(p, "utf8")).toBe('{"i":0}\n{"i":1}\n{"i":2}\n{"i":3}\n'));
    void w.append({ i: 4 });
    await w.close();
    expect((await readFile(p, "utf8")).endsWith('{"i":3}\n{"i":4}\n')).toBe(true);
  });

  it("refuses values JSON cannot hold and appends after close", async () => {
    const w = await openJsonlAppender(await scratch.file());
    await expect(w.append(undefined)).rejects.toThrow(TypeError);
    await w.close();
    await expect(w.append({})).rejects.toThrow(/closed/);
  });

  it("fails clearly when the file cannot be opened", async () => {
    await expect(openJsonlAppender("/nonexistent-dir/x.jsonl")).rejects.toMatchObject({ code: "ENOENT" });
  });
});

describe("readCompleteJsonLines", () => {
  it("reads a blob store's stream as it arrives: whole lines only, a character split across chunks decoded whole", async () => {
    const text = `{"a":"é"}\n\n{"b":2}\n{"c":`;
    const bytes = Buffer.from(text);
    const cut = bytes.indexOf(0xa9); // inside the two bytes of "é"
    const lines: string[] = [];
    for await (const l of readCompleteJsonLines(Readable.from([bytes.subarray(0, cut), bytes.subarray(cut)]))) lines.push(l);
    expect(lines).toEqual(['{"a":"é"}', '{"b":2}']);
  });
});
