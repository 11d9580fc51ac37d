// The envelope of an OpenAI batch input line: {custom_id, method, url, body}. The body itself is the
// endpoint's request (openai/bodies.ts), parsed per line when it runs, so one bad body fails only its line.
import { z } from "zod";
import { ENDPOINTS } from "../openai/backend.js";

/** OpenAI documents no bound; 512 keeps output lines and the resume Set reasonable. */
export const MAX_CUSTOM_ID_LENGTH = 512;

export const BatchLineSchema = z.object({
  custom_id: z
    .string()
    .min(1, "custom_id must not be empty")
    .max(MAX_CUSTOM_ID_LENGTH, `custom_id may be at most ${MAX_CUSTOM_ID_LENGTH} characters`),
  method: z.literal("POST", { error: 'method must be "POST"' }),
  url: z.enum(ENDPOINTS, { error: `url must be one of ${ENDPOINTS.join(", ")}` }),
  body: z.record(z.string(), z.unknown(), { error: "body must be a JSON object" }),
});
export type BatchLine = z.infer<typeof BatchLineSchema>;
