// Random hex for the ids OpenAI's objects carry (chatcmpl-…, batch_req_…, req_…).
import { randomFillSync } from "node:crypto";

/** Random bytes drawn a pool at a time: a batch asks for several ids per line, and each draw is a system call. */
const POOL_BYTES = 4096;
const pool = Buffer.alloc(POOL_BYTES);
let used = POOL_BYTES;

export function hexId(bytes = 12): string {
  if (bytes > POOL_BYTES) return randomFillSync(Buffer.alloc(bytes)).toString("hex");
  if (used + bytes > POOL_BYTES) {
    randomFillSync(pool);
    used = 0;
  }
  const id = pool.toString("hex", used, used + bytes);
  used += bytes;
  return id;
}
