// The routes behind a key, in the order the app mounts them and the OpenAPI document lists them. The open routes
// (health, readiness, documentation, the console's files, metrics) are mounted before the key check in app.ts.
import { batchesRoutes } from "./batches.js";
import { consoleRoutes } from "./console.js";
import { datasetsRoutes } from "./dataset-jobs.js";
import { filesRoutes } from "./files.js";
import { messageBatchesRoutes } from "./message-batches.js";
import { modelsRoutes } from "./models.js";
import type { RouteModule } from "./route-module.js";
import { statusRoutes } from "./status.js";
import { statusPageRoutes } from "./status-page.js";
import { inferenceRoutes } from "./sync.js";
import { organizationRoutes } from "./tenancy.js";
import { uploadsRoutes } from "./uploads.js";

export const KEYED_ROUTES: readonly RouteModule[] = [
  filesRoutes,
  uploadsRoutes,
  batchesRoutes,
  datasetsRoutes,
  messageBatchesRoutes,
  inferenceRoutes,
  modelsRoutes,
  statusRoutes,
  statusPageRoutes,
  consoleRoutes,
  organizationRoutes,
];
