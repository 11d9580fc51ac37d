// Stop signals: copies of one signal arriving together are one stop; a later one asks again.
import { describe, expect, it } from "vitest";
import { onStopSignals, SIGNAL_REPEAT_MS } from "../../app/signals.js";

describe("onStopSignals", () => {
  it("counts copies within the repeat window as one stop, and a later signal as the user asking again", () => {
    let t = 1_000;
    const calls: Array<[string, boolean]> = [];
    const off = onStopSignals(
      (signal, again) => calls.push([signal, again]),
      () => t,
    );
    try {
      process.emit("SIGTERM");
      t += 5;
      process.emit("SIGTERM");
      process.emit("SIGINT");
      expect(calls).toEqual([["SIGTERM", false]]);
      t += SIGNAL_REPEAT_MS;
      process.emit("SIGINT");
      expect(calls).toEqual([
        ["SIGTERM", false],
        ["SIGINT", true],
      ]);
    } finally {
      off();
    }
  });
});
