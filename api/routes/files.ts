// /v1/files: upload, list, retrieve, download, delete. Parsing here, decisions in the FileStore.
import path from "node:path";
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import { type Response, Router } from "express";
import { FileDeletedSchema, FileObjectSchema, listOf } from "../../domain/objects.js";
import type { FileStore } from "../../domain/ports.js";
import { forbidden, notFound } from "../errors.js";
import { isAdmin, ownerFrom } from "../http/auth.js";
import { listObject } from "../http/list.js";
import { errorResponses, jsonResponse, keyedRoute } from "../http/openapi-paths.js";
import { streamTo } from "../http/stream.js";
import { acceptUpload, discardUpload } from "../http/upload.js";
import { parseId, parseRequest } from "../http/validate.js";
import { FILE_ID_PATTERN, FileIdParams, ListFilesQuery, UploadFileForm } from "../schemas/requests.js";
import type { RouteModule } from "./route-module.js";

export interface FilesRouteDeps {
  files: FileStore;
  batchDir: string;
  maxFileBytes: number;
}

/** A display name only (never used as a path): no directories, no control characters, bounded. */
export function cleanFilename(name: string | undefined): string {
  const base = path
    .basename((name ?? "").replace(/\\/g, "/"))
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this strips from file names
    .replace(/[\u0000-\u001f\u007f]/g, "")
    .trim();
  return base.slice(0, 255) || "upload.jsonl";
}

function contentType(filename: string): string {
  return filename.toLowerCase().endsWith(".jsonl") ? "application/jsonl" : "application/octet-stream";
}

export function filesRouter(deps: FilesRouteDeps): Router {
  const { files } = deps;
  const router = Router();
  const fileId = (id: unknown) => parseId("file", FILE_ID_PATTERN, id);

  router.post("/v1/files", acceptUpload(deps), async (req, res) => {
    const tmpPath = req.file?.path;
    try {
      const form = parseRequest(UploadFileForm, { file: req.file, purpose: req.body?.purpose, expires_after: req.body?.expires_after });
      // The file store holds it to its key's storage bound (tenancy/storage-quota.ts).
      const object = await files.adopt({
        tmpPath: form.file.path,
        filename: cleanFilename(form.file.originalname),
        purpose: form.purpose,
        owner: ownerFrom(res),
        expiresAfter: form.expires_after,
      });
      res.json(object);
    } catch (err) {
      // A rejected upload must not linger in the temp dir; adopt moved it away if it succeeded.
      await discardUpload(tmpPath);
      throw err;
    }
  });

  router.get("/v1/files", async (req, res) => {
    const q = parseRequest(ListFilesQuery, req.query);
    const page = await files.list({ ...q, owner: ownerFrom(res) });
    res.json(listObject(page));
  });

  /**
   * The 404 for a file this key does not have; an admin, who reads every key's batches and so sees their files'
   * ids, is told instead that another key's files (its inputs and results alike) stay that key's.
   */
  const missing = async (res: Response, id: string, action: string) => {
    if (isAdmin(res)) {
      const other = await files.open(id, undefined);
      other?.content.destroy();
      if (other)
        return forbidden(
          `An admin key reads every key's batches but may ${action} only its own files: file '${id}' belongs to another key.`,
        );
    }
    return notFound("file", id);
  };

  router.get("/v1/files/:file_id", async (req, res) => {
    const id = fileId(req.params.file_id);
    const stored = await files.get(id, ownerFrom(res));
    if (!stored) throw await missing(res, id, "retrieve");
    res.json(stored.object);
  });

  router.get("/v1/files/:file_id/content", async (req, res) => {
    const id = fileId(req.params.file_id);
    const file = await files.open(id, ownerFrom(res));
    if (!file) throw await missing(res, id, "download");
    res.attachment(file.object.filename);
    res.set({ "Content-Type": contentType(file.object.filename), "Content-Length": String(file.size) });
    await streamTo(res, file.content);
  });

  router.delete("/v1/files/:file_id", async (req, res) => {
    const id = fileId(req.params.file_id);
    if (!(await files.delete(id, ownerFrom(res)))) throw await missing(res, id, "delete");
    res.json({ id, object: "file" as const, deleted: true });
  });

  return router;
}

// --- OpenAPI ---

export function registerFilesPaths(r: OpenAPIRegistry): void {
  r.registerPath(
    keyedRoute({
      method: "post",
      path: "/v1/files",
      tags: ["Files"],
      summary: "Upload a JSONL file of batch requests",
      description:
        "Multipart upload with a `file` part and `purpose=batch`. The file is streamed to disk; its lines are validated when a batch is created. An upload that would take its key's stored files past its `file_storage_limit_bytes` (10 GiB unless the keys file says) is a 400 `storage_quota_exceeded`.",
      request: { body: { required: true, content: { "multipart/form-data": { schema: UploadFileForm } } } },
      responses: { 200: jsonResponse(FileObjectSchema, "The stored file."), ...errorResponses(400, 401, 413) },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/v1/files",
      tags: ["Files"],
      summary: "List files",
      request: { query: ListFilesQuery },
      responses: {
        200: jsonResponse(listOf(FileObjectSchema, "FileList"), "A page of files; pass the last id as `after` for the next."),
        ...errorResponses(400, 401),
      },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/v1/files/{file_id}",
      tags: ["Files"],
      summary: "Retrieve a file",
      request: { params: FileIdParams },
      responses: { 200: jsonResponse(FileObjectSchema, "The file."), ...errorResponses(401, 404) },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "get",
      path: "/v1/files/{file_id}/content",
      tags: ["Files"],
      summary: "Download a file's content",
      request: { params: FileIdParams },
      responses: {
        200: {
          description:
            "The file's bytes: application/jsonl for .jsonl files (inputs, outputs, errors), application/octet-stream otherwise.",
          content: {
            "application/jsonl": {
              schema: { type: "string" },
              example: '{"id":"batch_req_1","custom_id":"req-1","response":{...},"error":null}\n',
            },
            "application/octet-stream": { schema: { type: "string", format: "binary" } },
          },
        },
        ...errorResponses(401, 404),
      },
    }),
  );
  r.registerPath(
    keyedRoute({
      method: "delete",
      path: "/v1/files/{file_id}",
      tags: ["Files"],
      summary: "Delete a file",
      request: { params: FileIdParams },
      responses: { 200: jsonResponse(FileDeletedSchema, "The file is gone."), ...errorResponses(401, 404) },
    }),
  );
}

export const filesRoutes: RouteModule = {
  source: import.meta.url,
  router: (d) => filesRouter({ files: d.files, batchDir: d.config.batchDir, maxFileBytes: d.config.maxFileBytes }),
  paths: registerFilesPaths,
};
