// What a dataset read's process is given and gives back, short of starting one (the system tier starts them:
// tests/e2e/dataset-read-limits.sys.test.ts): its memory by default a share of what the service may use, its entry
// beside the code that starts it, and its errors the same errors on this side of the boundary.
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { childEntry, readMemoryMb } from "../../dataset-jobs/read-processes.js";
import { received, sendable } from "../../dataset-jobs/read-tasks.js";
import { JobError } from "../../datasets/job.js";
import { DatasetError } from "../../datasets/tables.js";

const GIB = 2 ** 30;

describe("a dataset read's process", () => {
  it("takes DATASET_READ_MEMORY_MB as set, else half the memory the service may use shared by DATASET_READS, 256 MB to 4 GB", () => {
    expect(readMemoryMb(768, 2)).toBe(768);
    expect(readMemoryMb(0, 2, { total: 8 * GIB, constrained: undefined })).toBe(2048);
    expect(readMemoryMb(0, 4, { total: 8 * GIB, constrained: 0 })).toBe(1024);
    expect(readMemoryMb(0, 2, { total: 64 * GIB })).toBe(4096);
    expect(readMemoryMb(0, 8, { total: 2 * GIB })).toBe(256);
    // In a container, its cgroup's limit is what the service may use, not the machine's memory: the API pod's 1 GiB.
    expect(readMemoryMb(0, 2, { total: 64 * GIB, constrained: GIB })).toBe(256);
    // A cgroup with no limit reports more than the machine has.
    expect(readMemoryMb(0, 2, { total: 4 * GIB, constrained: 2 ** 62 })).toBe(1024);
    expect(readMemoryMb(0, 2)).toBeGreaterThanOrEqual(256);
  });

  it("starts from the entry beside its starter: TypeScript through tsx here, JavaScript in the compiled build", () => {
    const { entry, nodeArgs } = childEntry();
    expect(entry).toMatch(/dataset-jobs\/read-child\.ts$/);
    expect(existsSync(entry)).toBe(true);
    expect(nodeArgs[0]).toBe("--import");
    expect(existsSync(new URL(nodeArgs[1]))).toBe(true);
  });

  it("carries a dataset's and a job's errors across as themselves, and anything else as a failure of the read", () => {
    const where = received(sendable(new DatasetError("where: it took longer", "DuckDB's whole text", "where", "time")));
    expect(where).toBeInstanceOf(DatasetError);
    expect(where).toMatchObject({ message: "where: it took longer", detail: "DuckDB's whole text", field: "where", bound: "time" });
    const job = received(sendable(new JobError("job: limit: must be a whole number", "limit")));
    expect(job).toBeInstanceOf(JobError);
    expect(job).toMatchObject({ field: "limit" });
    const other = received(sendable(new TypeError("x is not a function")));
    expect(other).not.toBeInstanceOf(DatasetError);
    expect(other.message).toMatch(/^a dataset read's process failed: TypeError: x is not a function/);
  });
});
