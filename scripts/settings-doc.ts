// Writes the settings table of docs/configuration.md from config/settings.ts (npm run docs:config).
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { settingsTable } from "../config/settings.js";
import { repoRoot } from "../testkit/repo-root.js";

export const SETTINGS_MARKERS = ["<!-- settings:begin -->", "<!-- settings:end -->"] as const;

const file = path.join(repoRoot, "docs/configuration.md");
const text = readFileSync(file, "utf8");
const [begin, end] = SETTINGS_MARKERS;
const a = text.indexOf(begin);
const b = text.indexOf(end);
if (a < 0 || b < a) throw new Error(`${file} has no ${begin} ... ${end}`);
writeFileSync(file, `${text.slice(0, a + begin.length)}\n${settingsTable()}\n${text.slice(b)}`);
console.log(`wrote the settings table of ${path.relative(repoRoot, file)}`);
