// The route table of docs/api.md, written from the OpenAPI document (npm run docs:api): each route with its summary,
// the schemas of its request and its answer, and the file that serves it, so the reference cannot drift from the code.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { OpenAPIRegistry, OpenApiGeneratorV31 } from "@asteasolutions/zod-to-openapi";
import { DOCUMENTED } from "./openapi.js";
import { DOC_DEFAULTS } from "./routes/route-module.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

type Content = Record<string, { schema?: { $ref?: string; type?: string } }> | undefined;

/** A body's schema by its name in the document, else by its media type. */
function schemaName(content: Content): string {
  const [type, media] = Object.entries(content ?? {})[0] ?? [];
  if (!type) return "—";
  const ref = media?.schema?.$ref;
  if (ref) return `\`${ref.slice(ref.lastIndexOf("/") + 1)}\``;
  const kinds: Record<string, string> = {
    "multipart/form-data": "multipart form",
    "application/jsonl": "JSONL",
    "text/event-stream": "event stream",
    "text/plain": "text",
    "text/html": "HTML",
    "application/json": "JSON",
    "application/vnd.apache.parquet": "the table (Parquet, CSV, TSV or JSONL)",
    "*/*": "the file",
  };
  return kinds[type] ?? type;
}

interface Operation {
  summary?: string;
  requestBody?: { content?: Content };
  responses?: Record<string, { content?: Content }>;
}

/** One row per method and path: route, summary, request, answer, source. */
export function routeTable(): string {
  const rows: string[] = [];
  for (const routes of DOCUMENTED) {
    const registry = new OpenAPIRegistry();
    routes.paths(registry, DOC_DEFAULTS);
    const doc = new OpenApiGeneratorV31(registry.definitions).generateDocument({ openapi: "3.1.0", info: { title: "", version: "" } });
    const file = path.relative(ROOT, fileURLToPath(routes.source)).split(path.sep).join("/");
    for (const [route, methods] of Object.entries(doc.paths ?? {})) {
      for (const [method, op] of Object.entries(methods as Record<string, Operation>)) {
        const ok = Object.entries(op.responses ?? {}).find(([status]) => status.startsWith("2"))?.[1];
        const cells = [
          `\`${method.toUpperCase()} ${route}\``,
          (op.summary ?? "").replaceAll("|", "\\|"),
          schemaName(op.requestBody?.content),
          schemaName(ok?.content),
          `[\`${path.basename(file)}\`](../${file})`,
        ];
        rows.push(`| ${cells.join(" | ")} |`);
      }
    }
  }
  return ["| route | what | request | answer | source |", "|---|---|---|---|---|", ...rows].join("\n");
}
