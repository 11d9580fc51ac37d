// /v1/uploads: OpenAI's Uploads API (create, add parts, complete, cancel), as the official clients' chunked uploads
// use it. Each part streams to a temp file and then to the blob store; nothing is held in memory.
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { Router } from "express";
import { z } from "zod";
import { UploadPartSchema, UploadSchema } from "../../domain/objects.js";
import type { UploadStore } from "../../domain/ports.js";
import { ownerFrom } from "../http/auth.js";
import { errorResponses, jsonResponse, keyedRoute } from "../http/openapi-paths.js";
import { acceptUpload, discardUpload } from "../http/upload.js";
import { parseId, parseRequest } from "../http/validate.js";
import { CompleteUploadBody, CreateUploadBody, UPLOAD_ID_PATTERN, UploadIdParams } from "../schemas/requests.js";
import { cleanFilename } from "./files.js";
import type { RouteModule } from "./route-module.js";

/** OpenAI's bound on one part. */
export const MAX_PART_BYTES = 64 * 1024 * 1024;

export function uploadsRouter(deps: { uploads: UploadStore; batchDir: string }): Router {
  const { uploads } = deps;
  const router = Router();
  const uploadId = (id: unknown) => parseId("upload", UPLOAD_ID_PATTERN, id);

  router.post("/v1/uploads", async (req, res) => {
    const body = parseRequest(CreateUploadBody, req.body ?? {});
    // Checked by the bytes it declares against the key's storage bound, and each part again as it comes.
    const created = await uploads.create({
      filename: cleanFilename(body.filename),
      purpose: body.purpose,
      bytes: body.bytes,
      mime_type: body.mime_type,
      owner: ownerFrom(res),
      expiresAfter: body.expires_after,
    });
    res.json(created);
  });

  router.post(
    "/v1/uploads/:upload_id/parts",
    acceptUpload({ batchDir: deps.batchDir, maxFileBytes: MAX_PART_BYTES, field: "data" }),
    async (req, res) => {
      const tmpPath = req.file?.path;
      try {
        const id = uploadId(req.params.upload_id);
        if (!tmpPath) throw parseRequest(z.object({ data: z.string({ error: "a part named 'data' is required" }) }), {});
        res.json(await uploads.addPart(id, ownerFrom(res), tmpPath));
      } finally {
        // Moved into the store when it succeeded; a refused part must not linger.
        await discardUpload(tmpPath);
      }
    },
  );

  router.post("/v1/uploads/:upload_id/complete", async (req, res) => {
    const id = uploadId(req.params.upload_id);
    const body = parseRequest(CompleteUploadBody, req.body ?? {});
    res.json(await uploads.complete(id, ownerFrom(res), body));
  });

  router.post("/v1/uploads/:upload_id/cancel", async (req, res) => {
    res.json(await uploads.cancel(uploadId(req.params.upload_id), ownerFrom(res)));
  });
  return router;
}

// --- OpenAPI ---

export function registerUploadsPaths(r: OpenAPIRegistry): void {
  r.registerPath(
    keyedRoute({
      method: "post",
      path: "/v1/uploads",
      tags: ["Files"],
      summary: "Create an upload: a file sent in parts (purpose batch, open for an hour)",
      request: { body: { required: true, content: { "application/json": { schema: CreateUploadBody } } } },
      responses: { 200: jsonResponse(UploadSchema, "The upload, pending."), ...errorResponses(400, 401) },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "post",
      path: "/v1/uploads/{upload_id}/parts",
      tags: ["Files"],
      summary: "Add a part (at most 64 MB), streamed to the store",
      request: {
        params: UploadIdParams,
        body: {
          required: true,
          content: { "multipart/form-data": { schema: z.object({ data: z.string().openapi({ type: "string", format: "binary" }) }) } },
        },
      },
      responses: { 200: jsonResponse(UploadPartSchema, "The part."), ...errorResponses(400, 401, 404, 413) },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "post",
      path: "/v1/uploads/{upload_id}/complete",
      tags: ["Files"],
      summary: "Complete an upload: its parts, in the order given, become a File",
      request: { params: UploadIdParams, body: { required: true, content: { "application/json": { schema: CompleteUploadBody } } } },
      responses: { 200: jsonResponse(UploadSchema, "The upload, completed, with its file."), ...errorResponses(400, 401, 404) },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "post",
      path: "/v1/uploads/{upload_id}/cancel",
      tags: ["Files"],
      summary: "Cancel an upload: its parts are removed",
      request: { params: UploadIdParams },
      responses: { 200: jsonResponse(UploadSchema, "The upload, cancelled."), ...errorResponses(401, 404) },
    }),
  );
}

export const uploadsRoutes: RouteModule = {
  source: import.meta.url,
  router: (d) => d.uploads && uploadsRouter({ uploads: d.uploads, batchDir: d.config.batchDir }),
  paths: registerUploadsPaths,
};
