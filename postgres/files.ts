// The Files API on shared state: metadata rows in PostgreSQL, contents in the blob store (S3 or a shared folder).
// Content goes in before its row, so a row always has content; a crash in between leaves an orphan object only.
import type { Readable } from "node:stream";
import { InvalidRequestError } from "../domain/errors.js";
import type { FileObject } from "../domain/objects.js";
import type { FileRecord, NewFile, Owner, Page } from "../domain/ports.js";
import { adoptUpload, type FileStoreDeps, type NewFileRecord, newFileObject } from "../state/file-object.js";
import type { FileRecords } from "../state/ports.js";
import type { Db } from "./db.js";

export class PgFileStore implements FileRecords {
  constructor(private readonly deps: FileStoreDeps & { db: Db }) {}

  adopt(input: NewFile & { tmpPath: string }): Promise<FileObject> {
    return adoptUpload(this.deps.blobs, input, (r) => this.record(r));
  }

  /**
   * Records content already in the blob store (a batch's assembled output). The id is the caller's, so recording
   * twice (finalizing rerun after a crash) keeps one file.
   */
  async record(input: NewFileRecord): Promise<FileObject> {
    const object = newFileObject(input, this.deps.now(), this.deps.expirySeconds);
    const { rows } = await this.deps.db.query(
      `INSERT INTO files (id, owner, purpose, blob_key, expires_at, object) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (id) DO UPDATE SET object = files.object RETURNING object`,
      [input.id, input.owner, input.purpose, input.key, object.expires_at, object],
    );
    return rows[0].object;
  }

  async get(id: string, owner: Owner): Promise<FileRecord | undefined> {
    const row = await this.row(id, owner);
    return row && { object: row.object, owner };
  }

  /** The content's key, for the batch service (a batch reads its input from there). */
  async keyOf(id: string, owner: Owner): Promise<{ object: FileObject; key: string } | undefined> {
    const row = await this.row(id, owner);
    return row && { object: row.object, key: row.blob_key };
  }

  async open(id: string, owner: Owner | undefined): Promise<{ object: FileObject; size: number; content: Readable } | undefined> {
    const row = await this.row(id, owner);
    if (!row) return undefined;
    const blob = await this.deps.blobs.open(row.blob_key);
    return blob && { object: row.object, ...blob };
  }

  async list(q: { after?: string; limit: number; order: "asc" | "desc"; purpose?: string; owner: Owner }): Promise<Page<FileObject>> {
    const dir = q.order === "asc" ? ">" : "<";
    let afterSeq: string | undefined;
    if (q.after) {
      const { rows } = await this.deps.db.query("SELECT seq FROM files WHERE id = $1 AND owner IS NOT DISTINCT FROM $2", [
        q.after,
        q.owner,
      ]);
      if (rows.length === 0)
        throw new InvalidRequestError(`No object found with id '${q.after}' to list after.`, "invalid_request", "after");
      afterSeq = rows[0].seq;
    }
    const limit = Math.max(1, Math.floor(q.limit));
    const { rows } = await this.deps.db.query(
      `SELECT object FROM files WHERE owner IS NOT DISTINCT FROM $1 AND ($2::text IS NULL OR purpose = $2)
         AND ($3::bigint IS NULL OR seq ${dir} $3) ORDER BY seq ${q.order === "asc" ? "ASC" : "DESC"} LIMIT $4`,
      [q.owner, q.purpose ?? null, afterSeq ?? null, limit + 1],
    );
    return { data: rows.slice(0, limit).map((r) => r.object), has_more: rows.length > limit };
  }

  async delete(id: string, owner: Owner): Promise<boolean> {
    const { rows } = await this.deps.db.query("DELETE FROM files WHERE id = $1 AND owner IS NOT DISTINCT FROM $2 RETURNING blob_key", [
      id,
      owner,
    ]);
    if (rows.length === 0) return false;
    await this.dropContent(id, rows[0].blob_key);
    return true;
  }

  /** Files past their expiry, whoever owns them (maintenance removes them). */
  async expired(now: number, limit = 500): Promise<Array<{ id: string; key: string; purpose: string }>> {
    const { rows } = await this.deps.db.query(
      "SELECT id, blob_key, purpose FROM files WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2",
      [now, limit],
    );
    return rows.map((r) => ({ id: r.id, key: r.blob_key, purpose: r.purpose }));
  }

  /** Removes a file whoever owns it (housekeeping). */
  async remove(id: string): Promise<void> {
    const { rows } = await this.deps.db.query("DELETE FROM files WHERE id = $1 RETURNING blob_key", [id]);
    if (rows[0]) await this.dropContent(id, rows[0].blob_key);
  }

  /** The content goes with its file, unless an unfinished batch still reads it (an input deleted mid-run). */
  private async dropContent(id: string, key: string): Promise<void> {
    await this.forget(id);
    if (!(await this.referenced(key))) await this.deps.blobs.delete(key).catch(() => undefined);
  }

  /** A batch no longer names a deleted file as its output or error file. */
  private async forget(id: string): Promise<void> {
    await this.deps.db.query(
      `UPDATE batches SET doc = doc || jsonb_build_object(
         'output_file_id', CASE WHEN doc->>'output_file_id' = $1 THEN NULL ELSE doc->'output_file_id' END,
         'error_file_id', CASE WHEN doc->>'error_file_id' = $1 THEN NULL ELSE doc->'error_file_id' END)
       WHERE doc->>'output_file_id' = $1 OR doc->>'error_file_id' = $1`,
      [id],
    );
  }

  /** An unfinished batch still reads its input from this key. */
  private async referenced(key: string): Promise<boolean> {
    const { rows } = await this.deps.db.query(
      "SELECT 1 FROM batches WHERE input_key = $1 AND status IN ('validating', 'in_progress', 'finalizing', 'cancelling') LIMIT 1",
      [key],
    );
    return rows.length > 0;
  }

  private async row(id: string, owner: Owner | undefined): Promise<{ object: FileObject; blob_key: string } | undefined> {
    const { rows } = await this.deps.db.query(
      "SELECT object, blob_key FROM files WHERE id = $1 AND ($3::boolean OR owner IS NOT DISTINCT FROM $2)",
      [id, owner ?? null, owner === undefined],
    );
    return rows[0];
  }
}
