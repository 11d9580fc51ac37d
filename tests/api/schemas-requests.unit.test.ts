// The request schemas on their own: what POST /v1/batches, the list queries and the upload form accept.
import { describe, expect, it } from "vitest";
import { ApiError } from "../../api/errors.js";
import { parseId, parseRequest } from "../../api/http/validate.js";
import {
  BATCH_ID_PATTERN,
  CreateBatchBody,
  FILE_ID_PATTERN,
  InlineBatchRequest,
  isInlineBatchBody,
  ListBatchesQuery,
  ListFilesQuery,
  OutputQuery,
  ResultsQuery,
  UploadFileForm,
} from "../../api/schemas/requests.js";

const fileForm = { input_file_id: "file-3c9d1e2f4a5b6c7d8e9f0a1b", endpoint: "/v1/chat/completions", completion_window: "24h" };

/** The 400 a route would send for `input`, as {status, param, message}. */
function rejection(schema: Parameters<typeof parseRequest>[0], input: unknown) {
  try {
    parseRequest(schema, input);
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    const e = err as ApiError;
    return { status: e.status, param: e.param, code: e.code, message: e.message };
  }
  throw new Error("expected a rejection");
}

describe("completion_window", () => {
  it.each(["24h", "30m", "2h", "10s", "1d", "366d"])("accepts %s", (w) => {
    expect(parseRequest(CreateBatchBody, { ...fileForm, completion_window: w }).completion_window).toBe(w);
  });

  it.each(["24", "h", "0h", "-1h", "24 h", "1w", "24hours", "1.5h", "", "24H"])("rejects %j with param completion_window", (w) => {
    expect(rejection(CreateBatchBody, { ...fileForm, completion_window: w })).toMatchObject({ status: 400, param: "completion_window" });
  });

  it("says how long a window may be where it is too long to read", () => {
    expect(rejection(CreateBatchBody, { ...fileForm, completion_window: "99999999h" }).message).toMatch(/at most 366 days/);
  });

  it("rejects a non-string and defaults to 24h when absent", () => {
    expect(rejection(CreateBatchBody, { ...fileForm, completion_window: 24 }).param).toBe("completion_window");
    const { completion_window, ...rest } = fileForm;
    expect(parseRequest(CreateBatchBody, rest).completion_window).toBe("24h");
  });
});

describe("the file form", () => {
  it.each([
    ["max_tokens", { max_tokens: 3 }],
    ["input", { input: [{ prompt: "x" }] }],
    ["foo", { foo: 1 }],
  ])("refuses %s, a field it does not take, naming it: never drops it", (name, extra) => {
    expect(rejection(CreateBatchBody, { ...fileForm, ...extra })).toMatchObject({ status: 400, param: name });
  });
});

describe("metadata", () => {
  const withMeta = (metadata: unknown) => ({ ...fileForm, metadata });
  const keys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, "v"]));

  it("accepts 16 keys of 64 characters with 512-character values, and null", () => {
    const m = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`${i}`.padEnd(64, "k"), "v".repeat(512)]));
    expect(parseRequest(CreateBatchBody, withMeta(m)).metadata).toEqual(m);
    expect(parseRequest(CreateBatchBody, withMeta(null)).metadata).toBeNull();
  });

  it.each([
    ["17 keys", keys(17), /at most 16 keys/],
    ["a 65-character key", { ["k".repeat(65)]: "v" }, /keys may be at most 64/],
    ["a 513-character value", { a: "v".repeat(513) }, /longer than 512/],
  ])("rejects %s with param metadata", (_what, m, message) => {
    const r = rejection(CreateBatchBody, withMeta(m));
    expect(r).toMatchObject({ status: 400, param: "metadata" });
    expect(r.message).toMatch(message);
  });

  it("rejects non-string values and non-objects", () => {
    expect(rejection(CreateBatchBody, withMeta({ a: 1 })).param).toMatch(/^metadata/);
    expect(rejection(CreateBatchBody, withMeta("x")).param).toBe("metadata");
  });
});

describe("endpoint and input_file_id", () => {
  // OpenAI's batch endpoints; which of them the deployment serves is checked at creation (the backend says).
  it.each(["/v1/responses", "/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/moderations"])("accepts %s", (endpoint) => {
    expect(parseRequest(CreateBatchBody, { ...fileForm, endpoint }).endpoint).toBe(endpoint);
  });

  it.each(["/v1/images/generations", "v1/completions", "", null])("rejects endpoint %j", (endpoint) => {
    expect(rejection(CreateBatchBody, { ...fileForm, endpoint })).toMatchObject({ status: 400, param: "endpoint" });
  });

  it("names the missing parameter", () => {
    expect(rejection(CreateBatchBody, {})).toMatchObject({
      param: "input_file_id",
      code: "missing_required_parameter",
      message: "Missing required parameter: 'input_file_id'.",
    });
    expect(rejection(CreateBatchBody, { input_file_id: fileForm.input_file_id })).toMatchObject({ param: "endpoint" });
  });

  it("refuses input_file_id values that are not file ids", () => {
    for (const id of ["../../etc/passwd", "batch_abc", "file-", "file-a/b", 7]) {
      expect(rejection(CreateBatchBody, { ...fileForm, input_file_id: id }).param).toBe("input_file_id");
    }
  });
});

describe("list queries (strings from the URL)", () => {
  it("batches: limit 1..100, default 20", () => {
    expect(parseRequest(ListBatchesQuery, {})).toEqual({ limit: 20 });
    expect(parseRequest(ListBatchesQuery, { limit: "100", after: "batch_x" })).toEqual({ limit: 100, after: "batch_x" });
    for (const limit of ["0", "101", "-5", "2.5", "abc", ""]) {
      expect(rejection(ListBatchesQuery, { limit })).toMatchObject({ status: 400, param: "limit" });
    }
  });

  it("files: limit 1..10000 (default 10000), order asc|desc (default desc), optional purpose", () => {
    expect(parseRequest(ListFilesQuery, {})).toEqual({ limit: 10000, order: "desc" });
    expect(parseRequest(ListFilesQuery, { limit: "1", order: "asc", purpose: "batch" })).toEqual({
      limit: 1,
      order: "asc",
      purpose: "batch",
    });
    expect(rejection(ListFilesQuery, { limit: "10001" }).param).toBe("limit");
    expect(rejection(ListFilesQuery, { order: "newest" }).param).toBe("order");
  });

  // A query string is text: Number() would read hex, exponents, signs, spaces and "" as numbers.
  const notDecimal = ["0x10", "1e2", "+3", " 1", "1 ", "", "0b11", "0o7", "1_000", "Infinity", "١"];

  it.each(notDecimal)("output: after=%j is a 400 naming after, not a number read another way", (after) => {
    expect(rejection(OutputQuery, { after })).toMatchObject({
      status: 400,
      param: "after",
      message: expect.stringMatching(/after must be/),
    });
  });

  it.each(notDecimal)("output: limit=%j is a 400 naming limit", (limit) => {
    expect(rejection(OutputQuery, { limit })).toMatchObject({ status: 400, param: "limit" });
  });

  it("output: after and limit in decimal digits, a leading zero included; after defaults to 0", () => {
    expect(parseRequest(OutputQuery, {})).toEqual({ after: 0 });
    expect(parseRequest(OutputQuery, { after: "0", limit: "1" })).toEqual({ after: 0, limit: 1 });
    expect(parseRequest(OutputQuery, { after: "0012", limit: "1000000" })).toEqual({ after: 12, limit: 1_000_000 });
    expect(rejection(OutputQuery, { after: "99999999999999999999" }).param).toBe("after");
    expect(rejection(OutputQuery, { after: ["1", "2"] }).param).toBe("after");
  });

  it.each([ListBatchesQuery, ListFilesQuery])("lists: limit=0x10, 1e1, +3 or ' 1' is a 400 naming limit", (schema) => {
    for (const limit of ["0x10", "1e1", "+3", " 1"]) expect(rejection(schema, { limit }).param).toBe("limit");
  });

  it("results: format json (default) or jsonl", () => {
    expect(parseRequest(ResultsQuery, {})).toEqual({ format: "json" });
    expect(parseRequest(ResultsQuery, { format: "jsonl" })).toEqual({ format: "jsonl" });
    expect(rejection(ResultsQuery, { format: "csv" }).param).toBe("format");
  });
});

describe("upload form", () => {
  const file = { path: "/tmp/x", originalname: "a.jsonl", size: 1 };

  it("requires a file part and purpose=batch", () => {
    expect(parseRequest(UploadFileForm, { file, purpose: "batch" }).purpose).toBe("batch");
    expect(rejection(UploadFileForm, { purpose: "batch" }).param).toBe("file");
    expect(rejection(UploadFileForm, { file })).toMatchObject({ param: "purpose", message: "Missing required parameter: 'purpose'." });
    expect(rejection(UploadFileForm, { file, purpose: "fine-tune" })).toMatchObject({ param: "purpose" });
  });
});

describe("inline form", () => {
  it("is detected by `input` without `input_file_id`", () => {
    expect(isInlineBatchBody({ model: "m", input: [{ prompt: "hi" }] })).toBe(true);
    // A wrong `input` is still the inline form, so the error talks about the items.
    expect(isInlineBatchBody({ input: "hi" })).toBe(true);
    expect(isInlineBatchBody({ ...fileForm })).toBe(false);
    expect(isInlineBatchBody({ ...fileForm, input: [{ prompt: "hi" }] })).toBe(false);
    for (const body of [undefined, null, "x", [], [{ input: [] }], {}]) expect(isInlineBatchBody(body)).toBe(false);
  });

  it("parses the inline form's body with batch options defaulted", () => {
    const body = parseRequest(InlineBatchRequest, {
      model: "Qwen/Qwen2.5-0.5B-Instruct",
      input: [{ prompt: "What is 2+2?" }, { prompt: "Hello world" }],
      max_tokens: 50,
    });
    expect(body).toMatchObject({ model: "Qwen/Qwen2.5-0.5B-Instruct", max_tokens: 50, completion_window: "24h" });
    expect(body.input).toHaveLength(2);
  });

  it("validates the batch options and the items", () => {
    expect(rejection(InlineBatchRequest, { input: [{ prompt: "a" }], completion_window: "soon" }).param).toBe("completion_window");
    expect(rejection(InlineBatchRequest, { input: [{ prompt: "a" }], metadata: { ["k".repeat(65)]: "v" } }).param).toBe("metadata");
    expect(rejection(InlineBatchRequest, { input: [] }).param).toBe("input");
    expect(rejection(InlineBatchRequest, { input: "hi" }).param).toBe("input");
    expect(rejection(InlineBatchRequest, { input: [{ prompt: "a" }, { messages: [{ role: "user", content: "b" }] }] }).param).toBe(
      "input[1].messages",
    );
  });
});

describe("ids in paths", () => {
  it("accepts the store's ids and 404s anything else without looking it up", () => {
    expect(parseId("file", FILE_ID_PATTERN, "file-3c9d1e2f4a5b6c7d8e9f0a1b")).toBe("file-3c9d1e2f4a5b6c7d8e9f0a1b");
    expect(parseId("batch", BATCH_ID_PATTERN, "batch_6a1f0c2e9b7d4e3f8a5b1c0d")).toBe("batch_6a1f0c2e9b7d4e3f8a5b1c0d");
    for (const bad of ["../../etc/passwd", "file-..", "file-a.b", "file-a%2Fb", "batch_6a1f", ".", "", `file-${"a".repeat(200)}`]) {
      expect(() => parseId("file", FILE_ID_PATTERN, bad)).toThrow(expect.objectContaining({ status: 404, code: "not_found" }));
    }
  });
});
