// An outage said once as it starts and once as it ends; a try begun before it was said is no news of the end.
import pino from "pino";
import { describe, expect, it } from "vitest";
import { OutageLog } from "../../state/outage-log.js";

function logged() {
  const lines: Array<{ msg: string }> = [];
  const logger = pino({ level: "info" }, { write: (l: string) => lines.push(JSON.parse(l)) });
  return { logger, said: () => lines.map((l) => l.msg) };
}

describe("OutageLog", () => {
  it("says a run of failures once, and its end once", () => {
    const { logger, said } = logged();
    const log = new OutageLog(logger, "heartbeat");
    log.failed(new Error("down"));
    log.failed(new Error("down"));
    expect(log.ok()).toBeGreaterThanOrEqual(0);
    expect(said()).toEqual(["heartbeat failed; retrying (said again when it works)", "heartbeat works again"]);
  });

  it("does not end an outage on a try begun before it was said (a query on a connection still closing)", () => {
    const { logger, said } = logged();
    const log = new OutageLog(logger, "the database", { down: "down", up: "up" });
    const early = performance.now();
    log.failed(new Error("refused"));
    expect(log.ok(early)).toBe(0);
    log.failed(new Error("refused"));
    expect(said()).toEqual(["down"]);
    // Nor on one begun just after (a connection the database has not ended yet): only a second on.
    expect(log.ok(performance.now())).toBe(0);
    expect(said()).toEqual(["down"]);
    log.ok(performance.now() + 1_000);
    expect(said()).toEqual(["down", "up"]);
  });
});
