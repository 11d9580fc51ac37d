// Writes the settings table of docs/configuration.md from config/settings.ts (npm run docs:config).
import { settingsTable } from "../config/settings.js";
import { writeDocTable } from "../testkit/doc-tables.js";

writeDocTable("docs/configuration.md", "settings", settingsTable());
