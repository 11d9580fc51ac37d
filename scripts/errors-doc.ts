// Writes the table of docs/errors.md from the error catalogue, openai/error-catalogue.ts (npm run docs:errors).
import { errorsTable } from "../openai/error-catalogue.js";
import { writeDocTable } from "../testkit/doc-tables.js";

writeDocTable("docs/errors.md", "errors", errorsTable());
