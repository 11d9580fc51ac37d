// The OpenAPI document against the routes the app really registers, and Swagger UI served offline.
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildOpenApiDocument } from "../../api/openapi.js";
import { USAGE_PARAMS } from "../../domain/usage.js";
import { startTestService, type TestService } from "../helpers/service.js";

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

const METHODS = ["get", "post", "put", "patch", "delete"] as const;

const USAGE_PARAMS_BY_PATH = {
  "/v1/organization/usage/completions": USAGE_PARAMS.completions,
  "/v1/organization/usage/embeddings": USAGE_PARAMS.embeddings,
  "/v1/organization/costs": USAGE_PARAMS.costs,
};

/** "GET /v1/files/{file_id}" for every route in the app's router, nested routers included. */
function appRoutes(app: any): string[] {
  const out: string[] = [];
  const walk = (stack: any[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route) {
        const p = (prefix + layer.route.path).replace(/[:*]([A-Za-z_]+)/g, "{$1}");
        for (const m of Object.keys(layer.route.methods)) if (m !== "_all") out.push(`${m.toUpperCase()} ${p}`);
      } else if (layer.handle?.stack) {
        walk(layer.handle.stack, prefix + (typeof layer.rawPath === "string" && layer.rawPath !== "/" ? layer.rawPath : ""));
      }
    }
  };
  walk(app.router.stack, "");
  return out.sort();
}

function documentedRoutes(doc: any): string[] {
  const out: string[] = [];
  for (const [p, item] of Object.entries<any>(doc.paths)) for (const m of METHODS) if (item[m]) out.push(`${m.toUpperCase()} ${p}`);
  return out.sort();
}

describe("OpenAPI document", () => {
  it("documents exactly the routes the app serves", async () => {
    const doc = (await request(svc.service.app).get("/openapi.json")).body;
    const served = appRoutes(svc.service.app);
    expect(served.length).toBeGreaterThanOrEqual(17);
    expect(documentedRoutes(doc)).toEqual(served);
  });

  it("lists the OpenAI routes and the service's own", () => {
    const routes = documentedRoutes(buildOpenApiDocument());
    expect(routes).toEqual(
      expect.arrayContaining([
        "POST /v1/files",
        "GET /v1/files",
        "GET /v1/files/{file_id}",
        "GET /v1/files/{file_id}/content",
        "DELETE /v1/files/{file_id}",
        "POST /v1/batches",
        "GET /v1/batches",
        "GET /v1/batches/{batch_id}",
        "POST /v1/batches/{batch_id}/cancel",
        "GET /v1/batches/{batch_id}/results",
        "GET /v1/models",
        "GET /v1/models/{model}",
        "GET /queue/stats",
        "GET /pools",
        "GET /",
        "GET /health",
        "GET /ready",
      ]),
    );
  });

  it("describes parameters, bodies, errors and auth for every operation", () => {
    const doc: any = buildOpenApiDocument({ version: "9.9.9" });
    expect(doc.openapi).toMatch(/^3\.1/);
    expect(doc.info.version).toBe("9.9.9");
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
    for (const name of ["Batch", "FileObject", "Error", "CreateBatchRequest", "InlineBatchRequest", "QueueStats", "Pools"]) {
      expect(doc.components.schemas[name], name).toBeDefined();
    }
    for (const [p, item] of Object.entries<any>(doc.paths)) {
      for (const m of METHODS) {
        const op = item[m];
        if (!op) continue;
        const where = `${m} ${p}`;
        expect(op.summary, where).toBeTruthy();
        expect(op.responses["200"], where).toBeDefined();
        const pathParams = [...p.matchAll(/\{(\w+)\}/g)].map((x) => x[1]);
        for (const name of pathParams) {
          expect(
            op.parameters?.find((x: any) => x.in === "path" && x.name === name),
            `${where} ${name}`,
          ).toMatchObject({ required: true });
        }
        const keyed =
          p.startsWith("/v1") || p === "/queue/stats" || p.startsWith("/pools") || p === "/status.json" || p.startsWith("/console/api/");
        expect(op.security, where).toEqual(keyed ? [{ bearerAuth: [] }] : []);
        if (keyed) {
          // Anthropic's routes answer in Anthropic's envelope.
          const envelope = p.startsWith("/v1/messages/") ? "AnthropicError" : "Error";
          expect(op.responses["401"]?.content["application/json"].schema, where).toEqual({ $ref: `#/components/schemas/${envelope}` });
          expect(op.responses["500"], where).toBeDefined();
        }
      }
    }
  });

  it("documents the multipart upload, the two create forms and the list queries", () => {
    const doc: any = buildOpenApiDocument();
    const upload = doc.paths["/v1/files"].post.requestBody.content["multipart/form-data"].schema;
    expect(upload.properties.file).toMatchObject({ type: "string", format: "binary" });
    expect(upload.required).toEqual(expect.arrayContaining(["file", "purpose"]));

    const create = doc.paths["/v1/batches"].post.requestBody.content["application/json"];
    const refs = JSON.stringify(create.schema);
    expect(refs).toContain("#/components/schemas/CreateBatchRequest");
    expect(refs).toContain("#/components/schemas/InlineBatchRequest");
    expect(Object.keys(create.examples)).toEqual(["inline", "file"]);
    expect(doc.components.schemas.CreateBatchRequest.properties.endpoint.enum).toEqual([
      "/v1/responses",
      "/v1/chat/completions",
      "/v1/completions",
      "/v1/embeddings",
      "/v1/messages",
      "/v1/rerank",
      "/v1/score",
      "/v1/moderations",
    ]);
    expect(doc.components.schemas.CreateBatchRequest.properties.completion_window.pattern).toBeTruthy();

    const limit = doc.paths["/v1/batches"].get.parameters.find((x: any) => x.name === "limit");
    expect(limit).toMatchObject({ in: "query", schema: { minimum: 1, maximum: 100, default: 20 } });
    const names = doc.paths["/v1/files"].get.parameters.map((x: any) => x.name).sort();
    expect(names).toEqual(["after", "limit", "order", "purpose"]);
    expect(doc.paths["/v1/batches/{batch_id}/results"].get.responses["200"].content).toHaveProperty("application/jsonl");
  });
});

/** What Swagger UI's Try it out sends as it is: each parameter's example, the body's example (the first of several). */
function tryItOut(doc: any, op: any): { query: Record<string, unknown>; body?: unknown; missing: string[] } {
  const query: Record<string, unknown> = {};
  const missing: string[] = [];
  for (const p of op.parameters ?? []) {
    if (p.in !== "query") continue;
    const example = p.example ?? p.schema?.example;
    if (example !== undefined) query[p.name] = example;
    else if (p.required) missing.push(p.name);
  }
  const media = op.requestBody?.content?.["application/json"];
  if (!media) return { query, missing };
  const ref = media.schema?.$ref?.replace("#/components/schemas/", "");
  const schema = ref ? doc.components.schemas[ref] : media.schema;
  const body = media.example ?? Object.values<any>(media.examples ?? {})[0]?.value ?? schema?.example ?? schema?.examples?.[0];
  if (body === undefined) missing.push("body");
  return { query, body, missing };
}

describe("Try it out", () => {
  it("declares every query parameter the usage and costs routes take, start_time with a recent example", async () => {
    const doc = (await request(svc.service.app).get("/openapi.json")).body;
    const now = Math.floor(Date.now() / 1000);
    for (const [p, takes] of Object.entries(USAGE_PARAMS_BY_PATH)) {
      const params = doc.paths[p].get.parameters;
      expect(params.map((x: any) => x.name).sort(), p).toEqual([...takes].sort());
      const start = params.find((x: any) => x.name === "start_time");
      expect(start, p).toMatchObject({ in: "query", required: true });
      expect(now - start.example, p).toBeGreaterThan(0);
      expect(now - start.example, p).toBeLessThanOrEqual(8 * 86_400);
    }
  });

  it("runs every operation without a path parameter with its examples as they are: never a 400", async () => {
    const doc = (await request(svc.service.app).get("/openapi.json")).body;
    const refused: string[] = [];
    let tried = 0;
    for (const [p, item] of Object.entries<any>(doc.paths)) {
      if (p.includes("{")) continue;
      for (const m of METHODS) {
        if (!item[m] || (m === "post" && p === "/v1/files") || item[m].requestBody?.content?.["multipart/form-data"]) continue;
        const { query, body, missing } = tryItOut(doc, item[m]);
        if (missing.length) {
          refused.push(`${m} ${p}: no example for ${missing.join(", ")}`);
          continue;
        }
        let req = (request(svc.service.app) as any)[m](p).query(query);
        if (body !== undefined) req = req.send(body);
        const res = await req;
        tried++;
        // A model with no classification head cannot rank: the deployment's refusal, not the example's.
        if (res.body?.error?.code === "model_cannot_rank") continue;
        if (res.status === 400 || res.status === 422) refused.push(`${m} ${p}: ${res.status} ${JSON.stringify(res.body)}`);
      }
    }
    expect(refused).toEqual([]);
    expect(tried).toBeGreaterThan(20);
  });
});

describe("Swagger UI", () => {
  it("redirects /docs to /docs/ and serves the page and its assets from disk", async () => {
    const app = svc.service.app;
    const redirect = await request(app).get("/docs");
    expect(redirect.status).toBe(301);
    expect(redirect.headers.location).toBe("docs/");

    const page = await request(app).get("/docs/");
    expect(page.status).toBe(200);
    expect(page.headers["content-type"]).toMatch(/text\/html/);
    expect(page.text).toContain("swagger-ui");
    // Every asset the page names is relative and served by us: nothing needs the internet.
    const assets = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(assets.length).toBeGreaterThan(2);
    for (const asset of assets) {
      expect(asset, asset).toMatch(/^\.\//);
      const res = await request(app).get(`/docs/${asset.slice(2)}`);
      expect(res.status, asset).toBe(200);
    }
    const init = await request(app).get("/docs/swagger-ui-init.js");
    expect(init.text).toContain("/v1/batches/{batch_id}/cancel");
  });
});
