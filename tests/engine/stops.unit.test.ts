import { describe, expect, it } from "vitest";
import { heldBack } from "../../engine/generate/generate.js";
import { findStop } from "../../engine/generate/stops.js";

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

describe("heldBack", () => {
  it("holds the end a stop string may yet complete, and trailing whitespace where the end is trimmed", () => {
    expect(heldBack("Hello wor", ["world!"], false)).toBe(3);
    expect(heldBack("Hello", ["\n\n", "END"], false)).toBe(0);
    expect(heldBack("Hello\n", ["\n\n"], false)).toBe(1);
    expect(heldBack("Hello E", ["\n\n", "END"], false)).toBe(1);
    expect(heldBack("Hello  ", [], true)).toBe(2);
    expect(heldBack("Hello \n", ["\n\n"], true)).toBe(2);
    // At most a stop string's length less one: a whole one is found and cut before anything is held.
    expect(heldBack("xa", ["ab"], false)).toBe(1);
    expect(heldBack("ab", ["ab"], false)).toBe(0);
  });
});
