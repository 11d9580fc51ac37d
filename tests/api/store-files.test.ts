import { mkdtempSync, writeFileSync, existsSync, readdirSync, mkdirSync } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InvalidRequestError } from "../../api/control/errors.js";
import { DiskFileStore } from "../../api/stores/file-store.js";
import { FsBlobStore } from "../../api/stores/fs-blob-store.js";

const logger = pino({ level: "silent" });
let dir: string;
let clock: number;

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "obi-files-"));
  clock = 1_700_000_000;
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const open = () => DiskFileStore.open({ batchDir: dir, blobs: new FsBlobStore(dir), expirySeconds: 3600, logger, now: () => clock });

/** An "uploaded" temp file, as multer leaves it. */
function upload(content: string) {
  const p = path.join(dir, `upload-${Math.random().toString(36).slice(2)}`);
  writeFileSync(p, content);
  return p;
}

describe("file store", () => {
  it("adopts an upload into BATCH_DIR/files and keeps it across a reload", async () => {
    const store = await open();
    const tmp = upload('{"a":1}\n');
    const f = await store.adopt({ tmpPath: tmp, filename: "in.jsonl", purpose: "batch", owner: "alice" });
    expect(f).toMatchObject({
      object: "file",
      bytes: 8,
      filename: "in.jsonl",
      purpose: "batch",
      status: "processed",
      created_at: clock,
      expires_at: clock + 3600,
    });
    expect(f.id).toMatch(/^file-[a-f0-9]{24}$/);
    expect(existsSync(tmp)).toBe(false);
    const stored = store.get(f.id, "alice")!;
    expect(stored.path).toBe(path.join(dir, "files", `${f.id}.jsonl`));
    expect(await readFile(stored.path, "utf8")).toBe('{"a":1}\n');
    expect(existsSync(path.join(dir, "files", `${f.id}.json`))).toBe(true);

    const reloaded = await open();
    expect(reloaded.get(f.id, "alice")).toEqual(stored);
  });

  it("registers a file living elsewhere and deletes only its record", async () => {
    const store = await open();
    mkdirSync(path.join(dir, "batch_x"));
    const out = path.join(dir, "batch_x", "output.jsonl");
    writeFileSync(out, "line\n");
    const id = "file-0123456789abcdef01234567";
    const f = await store.register({ id, path: out, filename: "batch_x_output.jsonl", purpose: "batch_output", owner: null });
    expect(f).toMatchObject({ id, purpose: "batch_output", bytes: 5 });
    // Registering the same id again keeps one file.
    await store.register({ id, path: out, filename: "batch_x_output.jsonl", purpose: "batch_output", owner: null });
    expect(store.list({ limit: 10, order: "asc", owner: null }).data).toHaveLength(1);
    expect(await store.delete(id, null)).toBe(true);
    expect(existsSync(out)).toBe(true);
    expect(store.get(id, null)).toBeUndefined();
    expect((await open()).get(id, null)).toBeUndefined();
  });

  it("deletes an upload's content with its record", async () => {
    const store = await open();
    const f = await store.adopt({ tmpPath: upload("x\n"), filename: "a.jsonl", purpose: "batch", owner: null });
    const p = store.get(f.id, null)!.path;
    expect(await store.delete(f.id, null)).toBe(true);
    expect(existsSync(p)).toBe(false);
    expect(await store.delete(f.id, null)).toBe(false);
    expect(readdirSync(path.join(dir, "files"))).toEqual([]);
  });

  it("isolates owners: another owner's file is not found, listed or deleted", async () => {
    const store = await open();
    const f = await store.adopt({ tmpPath: upload("x\n"), filename: "a.jsonl", purpose: "batch", owner: "alice" });
    expect(store.get(f.id, "bob")).toBeUndefined();
    expect(store.get(f.id, null)).toBeUndefined();
    expect(store.list({ limit: 10, order: "desc", owner: "bob" }).data).toEqual([]);
    expect(await store.delete(f.id, "bob")).toBe(false);
    expect(store.get(f.id, "alice")).toBeDefined();
  });

  it("paginates by created_at then id, both orders, with a purpose filter", async () => {
    const store = await open();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      clock = 1_700_000_000 + Math.floor(i / 2); // pairs share a second: the id breaks the tie
      const purpose = i === 4 ? "batch_output" : "batch";
      ids.push((await store.adopt({ tmpPath: upload(`${i}\n`), filename: `${i}.jsonl`, purpose, owner: null })).id);
    }
    const asc = store.list({ limit: 100, order: "asc", owner: null }).data.map((f) => f.id);
    expect(asc).toHaveLength(5);
    const byCreatedThenId = [...ids].sort((a, b) => {
      const ca = ids.indexOf(a) >> 1;
      const cb = ids.indexOf(b) >> 1;
      return ca - cb || (a < b ? -1 : 1);
    });
    expect(asc).toEqual(byCreatedThenId);

    const p1 = store.list({ limit: 2, order: "desc", owner: null });
    expect(p1).toMatchObject({ has_more: true });
    const p2 = store.list({ limit: 2, order: "desc", owner: null, after: p1.data[1].id });
    const p3 = store.list({ limit: 2, order: "desc", owner: null, after: p2.data[1].id });
    expect(p3.has_more).toBe(false);
    expect([...p1.data, ...p2.data, ...p3.data].map((f) => f.id)).toEqual([...asc].reverse());

    const batchOnly = store.list({ limit: 100, order: "asc", owner: null, purpose: "batch" }).data;
    expect(batchOnly.map((f) => f.id)).toEqual(asc.filter((id) => id !== ids[4]));

    expect(() => store.list({ limit: 2, order: "asc", owner: null, after: "file-unknown" })).toThrow(InvalidRequestError);
  });

  it("skips corrupt metadata on load instead of failing", async () => {
    const store = await open();
    const f = await store.adopt({ tmpPath: upload("x\n"), filename: "a.jsonl", purpose: "batch", owner: null });
    writeFileSync(path.join(dir, "files", "file-aaaaaaaaaaaaaaaaaaaaaaaa.json"), "{not json");
    const reloaded = await open();
    expect(reloaded.get(f.id, null)).toBeDefined();
    expect(reloaded.list({ limit: 10, order: "asc", owner: null }).data).toHaveLength(1);
  });
});
