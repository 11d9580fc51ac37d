// Writes each folder README's list of files and its imports, and the floors picture of README.md and
// docs/architecture.md (npm run docs:readmes), from the files' opening comments, the imports and testkit/floors.ts.
import { writeDocTable } from "../testkit/doc-tables.js";
import { importEdges } from "../testkit/floors.js";
import { filesTable, floorsPicture, importsLine, listedFolders, readmeOf } from "../testkit/folder-readmes.js";

const edges = importEdges();
for (const folder of listedFolders()) {
  const { page, table } = readmeOf(folder);
  writeDocTable(page, table, filesTable(folder));
  if (!folder.includes("/")) writeDocTable(page, "imports", importsLine(folder, edges));
}
for (const page of ["README.md", "docs/architecture.md"]) writeDocTable(page, "floors", floorsPicture());
