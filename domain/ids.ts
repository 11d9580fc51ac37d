// Object ids in OpenAI's shape: a prefix and 24 random hex characters (96 bits; collisions are not a concern).
import { hexId } from "../openai/ids.js";

export const newBatchId = () => `batch_${hexId()}`;
export const newFileId = () => `file-${hexId()}`;
export const newUploadId = () => `upload_${hexId()}`;
export const newPartId = () => `part_${hexId()}`;

/** Batch folders are recognised by this exact shape, so nothing else under BATCH_DIR (often /tmp) is ever touched. */
export const BATCH_ID_RE = /^batch_[A-Za-z0-9]{24}$/;
/** A minute of one process's synchronous requests' usage, per key, model, endpoint and tier (tenancy/sync-accounts.ts). */
export const SYNC_USAGE_ID_RE = /^sync_\d+_[0-9a-f]{8}_[0-9a-f]{16}$/;
export const FILE_ID_RE = /^file-[A-Za-z0-9]{24}$/;
