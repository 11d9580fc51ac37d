// What a content store says when the disk or the object store fails it, in terms the floors above understand
// without knowing the store: the domain counts `StorageUnavailableError` among its refusals (503 with
// Retry-After), and the errno tests tell a full disk from a broken one.

/** The blob store (S3, or the disk) did not answer or refuses writes (read-only, I/O errors); retrying can succeed. */
export class StorageUnavailableError extends Error {
  readonly code = "storage_unavailable";
  readonly param = null;
  readonly retryAfterSeconds = 5;
  constructor(options?: { cause?: unknown }) {
    super("The service cannot reach its storage right now; retry shortly.");
    this.name = "StorageUnavailableError";
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}

export const storageUnavailable = (cause?: unknown) => new StorageUnavailableError({ cause });

/** The errno of a failure that means the machine's disk or file descriptors ran out, else undefined. */
export function exhaustedErrno(err: unknown): string | undefined {
  const errno = (err as NodeJS.ErrnoException | null)?.code;
  return errno === "ENOSPC" || errno === "EDQUOT" || errno === "EMFILE" || errno === "ENFILE" ? errno : undefined;
}

/** The disk refuses writes (remounted read-only) or fails them (an I/O error): not ours to fix, nor a 500. */
export const isStorageFault = (err: unknown) => {
  const errno = (err as NodeJS.ErrnoException | null)?.code;
  return errno === "EROFS" || errno === "EIO";
};

/** A full disk (or quota): the writes succeed again once space is freed. */
export const isStorageFull = (err: unknown) => {
  const errno = exhaustedErrno(err);
  return errno === "ENOSPC" || errno === "EDQUOT";
};
