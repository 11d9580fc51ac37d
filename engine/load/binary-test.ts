// node-llama-cpp's test of a binary before it loads it, run in a process group of its own: a Ctrl-C during the start
// reaches the terminal's whole group, and a test process killed by it was read as a broken binary (a stack trace, a
// fallback to another binary, and the start going on meanwhile).
import { createRequire, syncBuiltinESMExports } from "node:module";

const require = createRequire(import.meta.url);

/**
 * The file node-llama-cpp 3.22.1 forks to test a binary (bindings/utils/testBindingBinary.js, which imports `fork`
 * from node:child_process); tests/engine/binary-test.unit.test.ts fails if either changes.
 */
export const BINARY_TEST_FILE = /[\\/]node-llama-cpp[\\/]dist[\\/]bindings[\\/]utils[\\/]testBindingBinary\.js$/;

let detached = false;

/**
 * From now on, node-llama-cpp's binary tests are forked detached (their own session, out of the terminal's process
 * group), so only this process hears a Ctrl-C and decides what it means; every other fork is untouched. node-llama-cpp
 * still kills the test process when this one exits. Node's live bindings of the builtin module are updated
 * (syncBuiltinESMExports), as node-llama-cpp imports `fork` by name.
 */
export function detachBinaryTests(childProcess: Pick<typeof import("node:child_process"), "fork"> = require("node:child_process")): void {
  if (detached) return;
  detached = true;
  const fork = childProcess.fork;
  const forkDetached = (...args: unknown[]) => {
    const [modulePath, second, third] = args;
    if (typeof modulePath === "string" && BINARY_TEST_FILE.test(modulePath) && Array.isArray(second) && isOptions(third))
      return fork(modulePath, second, { ...third, detached: true });
    return (fork as (...a: unknown[]) => ReturnType<typeof fork>)(...args);
  };
  childProcess.fork = forkDetached as typeof fork;
  syncBuiltinESMExports();
}

const isOptions = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
