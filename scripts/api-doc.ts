// Writes the route table of docs/api.md from the OpenAPI document (npm run docs:api).
import { routeTable } from "../api/route-table.js";
import { writeDocTable } from "../testkit/doc-tables.js";

writeDocTable("docs/api.md", "routes", routeTable());
