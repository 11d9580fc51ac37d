// The Files API store. Contents live in the blob store under a key (an upload: files/<id>.jsonl; a batch's
// result: <batch_id>/output.jsonl); every file's metadata (uploads and batch outputs alike) is a small JSON
// document BATCH_DIR/files/<id>.json, replaced atomically, whose `path` field is the content's key.
import { mkdir, readdir, rm } from "node:fs/promises";
import path from "node:path";
import type { Readable } from "node:stream";
import type pino from "pino";
import type { FileStore, NewFile, Owner, Page, StoredFile } from "../contracts.js";
import { FileObjectSchema, type FileObject } from "../schemas/objects.js";
import { readJsonFile, writeJsonAtomic } from "./atomic-json.js";
import { FILE_ID_RE, newFileId } from "./ids.js";
import type { FsBlobStore } from "./fs-blob-store.js";
import { paginate } from "./paginate.js";
import { unixNow } from "../clock.js";

interface FileRecord {
  object: FileObject;
  owner: Owner;
  /** The content's blob key. */
  key: string;
  /** True when the store owns the content (an upload) and deletes it with the file. */
  managed: boolean;
}

export interface FileStoreOptions {
  batchDir: string;
  /** Where contents live (BATCH_DIR itself on one machine). */
  blobs: FsBlobStore;
  expirySeconds: number;
  logger: pino.Logger;
  /** Unix seconds; injectable so tests can order files deterministically. */
  now?: () => number;
  /** Told after a client deleted a file (so batches stop naming it). */
  onDeleted?: (id: string) => Promise<void>;
}

export class DiskFileStore implements FileStore {
  private readonly records = new Map<string, FileRecord>();
  private readonly dir: string;
  private readonly now: () => number;

  private constructor(private readonly opts: FileStoreOptions) {
    this.dir = path.join(opts.batchDir, "files");
    this.now = opts.now ?? unixNow;
  }

  /** Opens the store, loading every file recorded on disk. */
  static async open(opts: FileStoreOptions): Promise<DiskFileStore> {
    const store = new DiskFileStore(opts);
    await mkdir(store.dir, { recursive: true });
    await store.load();
    return store;
  }

  async adopt(input: NewFile & { tmpPath: string }): Promise<FileObject> {
    const id = newFileId();
    const key = `files/${id}.jsonl`;
    await this.opts.blobs.putFile(key, input.tmpPath);
    try {
      return await this.record(id, { ...input, key, managed: true });
    } catch (err) {
      await this.opts.blobs.delete(key);
      throw err;
    }
  }

  async register(input: NewFile & { path: string; id?: string }): Promise<FileObject> {
    // A caller-chosen id makes registration idempotent (a batch finalized twice after a crash keeps one file).
    const id = input.id ?? newFileId();
    if (!FILE_ID_RE.test(id)) throw new Error(`invalid file id '${id}'`);
    return this.record(id, { ...input, key: this.opts.blobs.keyOf(input.path), managed: false });
  }

  get(id: string, owner: Owner): StoredFile | undefined {
    const rec = this.records.get(id);
    if (!rec || rec.owner !== owner) return undefined;
    return { object: rec.object, path: this.opts.blobs.localPath(rec.key), owner: rec.owner };
  }

  async open(id: string, owner: Owner): Promise<{ object: FileObject; size: number; content: Readable } | undefined> {
    const rec = this.records.get(id);
    if (!rec || rec.owner !== owner) return undefined;
    // The record can outlive its content (deleted underneath us): no such file, not an internal error.
    const blob = await this.opts.blobs.open(rec.key);
    return blob && { object: rec.object, ...blob };
  }

  list(q: { after?: string; limit: number; order: "asc" | "desc"; purpose?: string; owner: Owner }): Page<FileObject> {
    const sign = q.order === "asc" ? 1 : -1;
    const sorted = [...this.records.values()]
      .filter((r) => r.owner === q.owner && (!q.purpose || r.object.purpose === q.purpose))
      .map((r) => r.object)
      .sort((a, b) => sign * (a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)));
    return paginate(sorted, (f) => f.id, q);
  }

  async delete(id: string, owner: Owner): Promise<boolean> {
    const rec = this.records.get(id);
    if (!rec || rec.owner !== owner) return false;
    const removed = await this.remove(id);
    if (removed) await this.opts.onDeleted?.(id);
    return removed;
  }

  /** Every file whoever owns it, with where its content lives (for housekeeping). */
  entries(): Array<{ object: FileObject; path: string }> {
    return [...this.records.values()].map((r) => ({ object: r.object, path: this.opts.blobs.localPath(r.key) }));
  }

  /**
   * Deletes a file whoever owns it (housekeeping; routes go through delete()). A registered file's content
   * belongs to its batch and stays, unless `content` says the file's bytes are due too (it expired).
   */
  async remove(id: string, opts: { content?: boolean } = {}): Promise<boolean> {
    const rec = this.records.get(id);
    if (!rec) return false;
    // Metadata goes first: a crash in between leaves an orphan content file, never a file without content.
    await rm(this.metaPath(id), { force: true });
    this.records.delete(id);
    if (rec.managed || opts.content) await this.opts.blobs.delete(rec.key);
    return true;
  }

  private async record(id: string, input: NewFile & { key: string; managed: boolean }): Promise<FileObject> {
    const created = this.records.get(id)?.object.created_at ?? this.now();
    const size = await this.opts.blobs.size(input.key);
    if (size === undefined) throw new Error(`no content under '${input.key}' to record as file ${id}`);
    const object: FileObject = {
      id,
      object: "file",
      bytes: size,
      created_at: created,
      filename: input.filename,
      purpose: input.purpose,
      status: "processed",
      expires_at: created + (input.expiresAfter?.seconds ?? this.opts.expirySeconds),
    };
    const rec: FileRecord = { object, owner: input.owner, key: input.key, managed: input.managed };
    await writeJsonAtomic(this.metaPath(id), {
      version: 1,
      owner: rec.owner,
      // The content's key (a path relative to BATCH_DIR, which keeps it movable).
      path: rec.key,
      managed: rec.managed,
      file: object,
    });
    this.records.set(id, rec);
    return object;
  }

  private metaPath(id: string) {
    return path.join(this.dir, `${id}.json`);
  }

  private async load() {
    for (const name of await readdir(this.dir)) {
      const m = /^(.+)\.json$/.exec(name);
      if (!m || !FILE_ID_RE.test(m[1])) continue;
      try {
        const raw = (await readJsonFile(path.join(this.dir, name))) as any;
        const object = FileObjectSchema.parse(raw?.file);
        if (object.id !== m[1] || typeof raw.path !== "string") throw new Error("metadata does not match its file name");
        const key = raw.path.split(path.sep).join("/");
        if ((await this.opts.blobs.size(key)) === undefined) throw new Error(`no content under '${key}'`);
        this.records.set(object.id, { object, owner: raw.owner ?? null, key, managed: raw.managed === true });
      } catch (err) {
        this.opts.logger.warn({ err, file: name }, "skipping unreadable file record (or its content is missing)");
      }
    }
  }
}
