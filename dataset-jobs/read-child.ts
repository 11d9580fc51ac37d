// The entry of a dataset read's own process (started by dataset-jobs/read-processes.ts): it takes one task over
// IPC, runs it, says how it ended, and exits. Whatever a client's `where` makes DuckDB build stays in this process,
// which its parent kills past its memory or its time.
import { type ChildMessage, type ParentMessage, runTask, sendable } from "./read-tasks.js";

const send = (m: ChildMessage) =>
  new Promise<void>((resolve) => {
    if (!process.send) return resolve();
    process.send(m, undefined, undefined, () => resolve());
  });

// A parent that is gone has no use for the answer.
process.on("disconnect", () => process.exit(0));

process.once("message", async (m: ParentMessage) => {
  try {
    const value = await runTask(m.task, (running) => void send({ type: "step", running }));
    await send({ type: "done", value });
  } catch (err) {
    await send({ type: "failed", error: sendable(err) });
  }
  process.exit(0);
});

// DuckDB and its catalogue load while the process waits for its task: a process started ahead of its read starts it warm.
await (await import("../datasets/duckdb-tables.js")).warmUp();
