// Random hex for the ids OpenAI's objects carry (chatcmpl-…, batch_req_…, req_…).
import { randomBytes } from "node:crypto";

export const hexId = (bytes = 12) => randomBytes(bytes).toString("hex");
