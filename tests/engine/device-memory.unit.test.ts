// The memory budget's base on the CPU: the RAM this process may use, which in a container is its cgroup's limit.
import os from "node:os";
import { afterEach, describe, expect, it, vi } from "vitest";
import { usableRam } from "../../engine/load/device-memory.js";

describe("usableRam", () => {
  afterEach(() => vi.restoreAllMocks());

  it("takes a cgroup limit lower than the machine's memory (a pod's limit, not its node's RAM)", () => {
    vi.spyOn(process, "constrainedMemory").mockReturnValue(4 * 2 ** 30);
    expect(usableRam()).toBe(Math.min(4 * 2 ** 30, os.totalmem()));
  });

  it("takes the machine's memory where there is no limit (cgroup v2 reports 'max' as a huge number, v1 none at all)", () => {
    vi.spyOn(process, "constrainedMemory").mockReturnValue(2 ** 64);
    expect(usableRam()).toBe(os.totalmem());
    vi.spyOn(process, "constrainedMemory").mockReturnValue(0);
    expect(usableRam()).toBe(os.totalmem());
  });
});
