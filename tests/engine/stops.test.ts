import { describe, expect, it } from "vitest";
import { findStop } from "../../engine/stops.js";

describe("findStop", () => {
  it("finds the earliest of several stop strings", () => {
    expect(findStop("a cat. a dog!", [".", "!"])).toEqual({ index: 5, stop: "." });
    expect(findStop("no stop here", ["."])).toBeNull();
  });

  it("finds a stop string that straddles the last checked position", () => {
    // "END" starts before position 5 (checked earlier) and ends after it.
    expect(findStop("abcdENDx", ["END"], 5)).toEqual({ index: 4, stop: "END" });
  });

  it("ignores empty stop strings", () => {
    expect(findStop("abc", ["", "c"])).toEqual({ index: 2, stop: "c" });
    expect(findStop("abc", [""])).toBeNull();
  });
});
