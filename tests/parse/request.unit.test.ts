// Every served endpoint's body is checked by its own folder's schema, by one set of rules: OpenAI's bodies by
// openai/, Anthropic's Messages by anthropic/, each refusal naming the field as the client wrote it.
import { describe, expect, it } from "vitest";
import { MessagesParamsSchema } from "../../anthropic/params.js";
import { ENDPOINTS, type Endpoint } from "../../openai/backend.js";
import { ChatBodySchema } from "../../openai/bodies.js";
import { RequestError } from "../../openai/errors.js";
import { bodySchemaFor, parseRequest } from "../../parse/request.js";

function refusal(endpoint: Endpoint, body: unknown): RequestError {
  try {
    parseRequest(endpoint, body);
  } catch (err) {
    if (err instanceof RequestError) return err;
    throw err;
  }
  throw new Error("accepted");
}

describe("parseRequest over every served endpoint", () => {
  it("has a schema for each, from the folder that defines it", () => {
    for (const endpoint of ENDPOINTS) expect(bodySchemaFor(endpoint), endpoint).toBeDefined();
    expect(bodySchemaFor("/v1/messages")).toBe(MessagesParamsSchema);
    expect(bodySchemaFor("/v1/chat/completions")).toBe(ChatBodySchema);
  });

  it("refuses a Messages body by its own fields, as a chat body is refused by its", () => {
    const messages = [{ role: "user", content: "Hi" }];
    expect(refusal("/v1/messages", { model: "m", messages, max_tokens: 4, top_n: 2 })).toMatchObject({
      code: "unknown_parameter",
      param: "top_n",
    });
    expect(refusal("/v1/messages", { model: "m", messages })).toMatchObject({ code: "missing_required_parameter", param: "max_tokens" });
    expect(refusal("/v1/chat/completions", { model: "m", messages, top_k: 2 })).toMatchObject({
      code: "unknown_parameter",
      param: "top_k",
    });
    expect(parseRequest("/v1/messages", { model: "m", messages, max_tokens: 4, top_k: 2 })).toMatchObject({
      endpoint: "/v1/messages",
      body: { top_k: 2 },
    });
  });

  it("refuses a string that names no endpoint, whichever API's it resembles", () => {
    for (const endpoint of ["/v1/messages/batches", "/v1/chat", "__proto__"])
      expect(refusal(endpoint as Endpoint, {})).toMatchObject({ code: "invalid_url" });
  });
});
