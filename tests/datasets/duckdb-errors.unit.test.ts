// A read stopped at a limit, as its error tells it: the `where` named where the job has one (else the file), what
// bounds it named as the caller's user sets it, and the limit it met kept on the error for the caller.
import { describe, expect, it } from "vitest";
import { datasetError, StepLimit } from "../../datasets/duckdb-errors.js";

const files = ["/scratch/input.csv"];
const limitNames = { memory: "DATASET_READ_MEMORY_MB=512", time: "DATASET_STEP_SECONDS" };

describe("a read stopped at a limit", () => {
  it("names the where and the memory's setting, whether DuckDB or the C++ runtime could not allocate", () => {
    for (const message of ["Out of Memory Error: Failed to allocate block of 1073741824 bytes", "std::bad_alloc"]) {
      const err = datasetError(new Error(message), {
        spec: { input: files[0], where: "length(repeat(t, 300000000)) > 0" },
        files,
        stage: "rows",
        clientSql: true,
        limitNames,
      });
      expect(err, message).toMatchObject({ field: "where", bound: "memory", detail: message });
      expect(err.message, message).toBe(
        "where: it needed more memory or scratch disk than one dataset read may take here (DATASET_READ_MEMORY_MB=512), so it was stopped (a costly where?)",
      );
    }
  });

  it("names the where and the step's setting when a step ran past it, and the file when the job has no where", () => {
    const ctx = { files, stage: "rows" as const, clientSql: true, limitNames };
    const step = new StepLimit(60_000, limitNames.time);
    const withWhere = datasetError(step, { ...ctx, spec: { input: files[0], where: "levenshtein(t, t) < 0" } });
    expect(withWhere).toMatchObject({ field: "where", bound: "time" });
    expect(withWhere.message).toBe(
      "where: it took longer than 60 s, the most one step of a dataset read may take here (DATASET_STEP_SECONDS), so it was stopped (a costly where?)",
    );
    const without = datasetError(step, { ...ctx, spec: { input: files[0] } });
    expect(without).toMatchObject({ field: undefined, bound: "time" });
    expect(without.message).toMatch(/^\/scratch\/input\.csv: it took longer than 60 s/);
  });
});
