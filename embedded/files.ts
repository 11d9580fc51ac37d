// The Files API in this process's memory, contents in the blob store: the PostgreSQL file store's counterpart.
import type { Readable } from "node:stream";
import type { FileObject } from "../domain/objects.js";
import { paginate } from "../domain/paginate.js";
import type { FileRecord, NewFile, Owner, Page } from "../domain/ports.js";
import { adoptUpload, type FileStoreDeps, type NewFileRecord, newFileObject } from "../state/file-object.js";
import { type FileRecords, OPEN_STATUSES } from "../state/ports.js";
import type { FileEntry, MemoryState } from "./state.js";

export class MemoryFileRecords implements FileRecords {
  constructor(
    private readonly state: MemoryState,
    private readonly deps: FileStoreDeps,
  ) {}

  adopt(input: NewFile & { tmpPath: string }): Promise<FileObject> {
    return adoptUpload(this.deps.blobs, input, (r) => this.record(r));
  }

  /** Recording an id twice (finalizing rerun) keeps the first record. */
  async record(input: NewFileRecord): Promise<FileObject> {
    const known = this.state.files.get(input.id);
    if (known) return structuredClone(known.object);
    const object = newFileObject(input, this.deps.now(), this.deps.expirySeconds);
    const entry = { object, owner: input.owner, key: input.key, seq: this.state.nextSeq() };
    // Durable before it is listed: a write refused (a full disk) leaves no file that a client was told is not there.
    await this.state.keepFile(input.id, entry);
    if (!this.state.files.has(input.id)) this.state.files.set(input.id, entry);
    return structuredClone(this.state.files.get(input.id)!.object);
  }

  async get(id: string, owner: Owner): Promise<FileRecord | undefined> {
    const f = this.entry(id, owner);
    return f && { object: structuredClone(f.object), owner };
  }

  async keyOf(id: string, owner: Owner): Promise<{ object: FileObject; key: string } | undefined> {
    const f = this.entry(id, owner);
    return f && { object: structuredClone(f.object), key: f.key };
  }

  async open(id: string, owner: Owner | undefined): Promise<{ object: FileObject; size: number; content: Readable } | undefined> {
    const f = this.entry(id, owner);
    if (!f) return undefined;
    const blob = await this.deps.blobs.open(f.key);
    return blob && { object: structuredClone(f.object), ...blob };
  }

  async list(q: { after?: string; limit: number; order: "asc" | "desc"; purpose?: string; owner: Owner }): Promise<Page<FileObject>> {
    const mine = [...this.state.files.values()]
      .filter((f) => f.owner === q.owner && (!q.purpose || f.object.purpose === q.purpose))
      .sort((a, b) => (q.order === "asc" ? a.seq - b.seq : b.seq - a.seq));
    const page = paginate(mine, (f) => f.object.id, q);
    return { data: page.data.map((f) => structuredClone(f.object)), has_more: page.has_more };
  }

  async delete(id: string, owner: Owner): Promise<boolean> {
    if (!this.entry(id, owner)) return false;
    await this.remove(id);
    return true;
  }

  async expired(now: number, limit = 500): Promise<Array<{ id: string; key: string; purpose: string }>> {
    return [...this.state.files.values()]
      .filter((f) => f.object.expires_at != null && f.object.expires_at <= now)
      .sort((a, b) => (a.object.expires_at ?? 0) - (b.object.expires_at ?? 0))
      .slice(0, limit)
      .map((f) => ({ id: f.object.id, key: f.key, purpose: f.object.purpose }));
  }

  /** The content goes with its file, unless an unfinished batch still reads it (an input deleted mid-run). */
  async remove(id: string): Promise<void> {
    const f = this.state.files.get(id);
    if (!f) return;
    // Gone on disk before it is gone from the listing: a removal the disk refuses leaves the file as it was.
    await this.state.keepFile(id, null);
    this.state.files.delete(id);
    let referenced = false;
    const named: string[] = [];
    for (const e of this.state.batches.values()) {
      // A batch no longer names a deleted file as its output or error file.
      if (e.batch.output_file_id === id || e.batch.error_file_id === id) named.push(e.batch.id);
      if (e.batch.output_file_id === id) e.batch.output_file_id = null;
      if (e.batch.error_file_id === id) e.batch.error_file_id = null;
      if (e.inputKey === f.key && OPEN_STATUSES.includes(e.batch.status)) referenced = true;
    }
    await this.state.savedBatch(...named);
    if (!referenced) await this.deps.blobs.delete(f.key).catch(() => undefined);
  }

  private entry(id: string, owner: Owner | undefined): FileEntry | undefined {
    const f = this.state.files.get(id);
    return f && (owner === undefined || f.owner === owner) ? f : undefined;
  }
}
