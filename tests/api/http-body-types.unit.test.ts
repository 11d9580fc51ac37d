// The body-type check on its own: JSON routes read application/json only, file routes multipart only, and a
// request with no body passes whatever it says; the file routes come from the OpenAPI registry.
import express from "express";
import request from "supertest";
import { describe, expect, it } from "vitest";
import { requireBodyType, takesFiles } from "../../api/http/body-types.js";
import { errorHandler } from "../../api/http/error-handler.js";
import { openApiRegistry, registeredRoutes } from "../../api/openapi.js";

const files = takesFiles(registeredRoutes(openApiRegistry()));

function app() {
  const a = express();
  // Mounted under a prefix, as the app mounts it.
  a.use(["/v1", "/queue"], requireBodyType(files));
  a.use(express.json());
  a.post(["/v1/batches/pause", "/v1/batches/:id/cancel", "/v1/files", "/v1/uploads/:id/parts", "/v1/chat/completions"], (req, res) => {
    res.json({ body: req.body ?? null });
  });
  a.use(errorHandler({ maxFileBytes: 1 }));
  return a;
}

const expect415 = (res: request.Response) => {
  expect(res.status).toBe(415);
  expect(res.body.error).toMatchObject({ type: "invalid_request_error", code: "unsupported_media_type", param: null });
};

describe("the routes that take files, read from the OpenAPI registry", () => {
  it("are the file upload and an upload's parts, and nothing else", () => {
    const at = (method: string, path: string) => files({ method, path } as express.Request);
    expect(at("POST", "/v1/files")).toBe(true);
    expect(at("POST", "/v1/uploads/upload_abc/parts")).toBe(true);
    for (const path of ["/v1/batches", "/v1/uploads", "/v1/uploads/upload_abc/complete", "/v1/chat/completions", "/v1/dataset_batches"])
      expect(at("POST", path), path).toBe(false);
    expect(at("GET", "/v1/files")).toBe(false);
  });
});

describe("a JSON route's body", () => {
  it.each([
    ["text/plain", "text/plain"],
    ["text/plain;charset=UTF-8", "text/plain;charset=UTF-8"],
    ["a form's urlencoded body", "application/x-www-form-urlencoded"],
    ["multipart", "multipart/form-data; boundary=x"],
    ["JSON by another name", "application/vnd.api+json"],
  ])("refuses %s with 415 saying what to send", async (_what, type) => {
    const res = await request(app()).post("/v1/batches/pause").set("content-type", type).send('{"model":"m"}');
    expect415(res);
    expect(res.body.error.message).toMatch(/Content-Type: application\/json/);
  });

  it("refuses a body with no Content-Type at all", async () => {
    const res = await request(app()).post("/v1/chat/completions").unset("content-type").send(Buffer.from('{"model":"m"}'));
    expect415(res);
  });

  it("reads application/json, with a charset too", async () => {
    const res = await request(app()).post("/v1/batches/pause").set("content-type", "application/json; charset=utf-8").send('{"model":"m"}');
    expect(res.status).toBe(200);
    expect(res.body.body).toEqual({ model: "m" });
  });

  it("lets a bodiless POST through whatever it says (a cancel from the console or a client)", async () => {
    expect((await request(app()).post("/v1/batches/batch_x/cancel")).status).toBe(200);
    expect((await request(app()).post("/v1/batches/batch_x/cancel").set("content-type", "text/plain")).status).toBe(200);
  });
});

describe("a file route's body", () => {
  it("takes multipart and refuses JSON or text with 415", async () => {
    const ok = await request(app()).post("/v1/files").field("purpose", "batch");
    expect(ok.status).toBe(200);
    const json = await request(app()).post("/v1/files").send({ purpose: "batch" });
    expect415(json);
    expect(json.body.error.message).toMatch(/multipart\/form-data/);
    expect415(await request(app()).post("/v1/uploads/upload_x/parts").set("content-type", "text/plain").send("data"));
  });
});
