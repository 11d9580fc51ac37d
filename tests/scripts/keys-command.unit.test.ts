// `npm run keys`'s arguments: every entry it would print loads with the keys file's schema; a flag it does not know, a
// value the start would refuse or an id that is a flag is a usage error naming it.
import { describe, expect, it } from "vitest";
import { parseKeysCommand } from "../../scripts/keys-command.js";

describe("npm run keys", () => {
  it.each([
    [["new", "analysts", "--limit", "star=abc"], "--limit 'star=abc': TOKENS must be a whole number"],
    [["new", "analysts", "--limit", "*=-5"], "--limit '*=-5': must be a whole number >= 1"],
    [["new", "analysts", "--limit", "*=1.5"], "--limit '*=1.5': must be a whole number >= 1"],
    [["new", "analysts", "--limit", "=5"], "--limit '=5': MODEL is empty ('*' for every model not named)"],
    [["new", "analysts", "--limit", "gpt"], "--limit 'gpt': must be MODEL=TOKENS ('*' for every model not named)"],
    [["new", "analysts", "--limit", "m=1", "--limit", "m=2"], "--limit: the model 'm' is given twice"],
    [["new", "analysts", "--weight", "0"], "--weight 0: must be above 0"],
    [["new", "analysts", "--weight", "abc"], "--weight 'abc': must be a number"],
    [["new", "analysts", "--weight"], "--weight needs a value (--weight N)"],
    [["new", "--admn"], "unknown option '--admn' (did you mean --admin?)"],
    [["new", "--admn", "x"], "unknown option '--admn' (did you mean --admin?)"],
    [["new", "x", "--wieght", "2"], "unknown option '--wieght' (did you mean --weight?)"],
    [["new", "--", "--admn"], "the id '--admn': must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"],
    [["new", "a", "b"], "new takes one id: unexpected 'b'"],
    [["new"], "new needs the key's id (npm run keys -- new <id>)"],
    [["hash", "x"], "hash takes no argument (it reads the secret from standard input): 'x'"],
    [["frob"], "unknown command 'frob'"],
  ])("%j: a usage error naming it", (argv, message) => {
    expect(parseKeysCommand(argv)).toEqual({ kind: "usage", message });
  });

  it("reads the flags into the entry's fields, either form of a value", () => {
    expect(parseKeysCommand(["new", "labeling", "--admin", "--weight", "2", "--limit", "*=2000000", "--limit=m=5"])).toEqual({
      kind: "new",
      id: "labeling",
      fields: { admin: true, weight: 2, enqueued_token_limits: { "*": 2000000, m: 5 } },
    });
    expect(parseKeysCommand(["new", "x", "--weight=0.5"])).toEqual({ kind: "new", id: "x", fields: { weight: 0.5 } });
    expect(parseKeysCommand(["hash"])).toEqual({ kind: "hash" });
  });
});
