// A key's bound on the bytes stored for it (the keys file's file_storage_limit_bytes), kept where bytes are stored:
// every file adopted for it (an upload, an inline batch's lines, a retry's or a dataset job's generated files) and
// every part of its uploads still open counts, so no way in passes the bound that another refuses. A file deleted
// or expired, or an upload completed, cancelled or expired, gives its bytes back: what counts is what it holds now.
import { stat } from "node:fs/promises";
import { storageQuotaExceeded } from "../domain/errors.js";
import type { FileObject } from "../domain/objects.js";
import type { NewFile, Owner } from "../domain/ports.js";
import type { FileRecords } from "../state/ports.js";

const PAGE = 10_000;

export interface StorageQuotaDeps {
  files: FileRecords;
  /** The owner's bound in bytes; undefined: none (no key, an open API). */
  limitOf: (owner: Owner) => number | undefined;
}

export class StorageQuota {
  /** Each owner's stores being checked and made in this process: one at a time, so two cannot share the room left. */
  private readonly pending = new Map<string, Promise<unknown>>();
  /** What the owner's open uploads' parts hold (set by the upload store, which alone knows them). */
  partsOf: (owner: Owner) => Promise<number> = async () => 0;

  constructor(private readonly deps: StorageQuotaDeps) {}

  /** Runs `store` (which keeps `adding` bytes more for `owner`) once what the owner holds leaves room for them. */
  async within<T>(owner: Owner, adding: number, store: () => Promise<T>): Promise<T> {
    const limit = this.deps.limitOf(owner);
    if (limit === undefined || owner === null) return store();
    const before = this.pending.get(owner) ?? Promise.resolve();
    const run = before
      .catch(() => undefined)
      .then(async () => {
        const used = (await this.storedBytes(owner)) + (await this.partsOf(owner));
        if (used + adding > limit) throw storageQuotaExceeded(limit, used, adding);
        return store();
      });
    this.pending.set(owner, run);
    try {
      return await run;
    } finally {
      if (this.pending.get(owner) === run) this.pending.delete(owner);
    }
  }

  /** The file store with every adopt held to its owner's bound (`exempt`: what was counted already, an upload's parts). */
  guard(files: FileRecords): FileRecords {
    const adopt = async (input: NewFile & { tmpPath: string }): Promise<FileObject> => {
      const { size } = await stat(input.tmpPath);
      return this.within(input.owner, size, () => files.adopt(input));
    };
    return new Proxy(files, {
      get: (target, prop, receiver) => {
        if (prop === "adopt") return adopt;
        const value = Reflect.get(target, prop, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  }

  private async storedBytes(owner: Owner): Promise<number> {
    let total = 0;
    let after: string | undefined;
    for (;;) {
      const page = await this.deps.files.list({ after, limit: PAGE, order: "asc", owner });
      for (const f of page.data) total += f.bytes;
      if (!page.has_more || page.data.length === 0) return total;
      after = page.data[page.data.length - 1].id;
    }
  }
}
