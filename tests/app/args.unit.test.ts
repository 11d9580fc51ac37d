import { describe, expect, it } from "vitest";
import { parseServerArgs } from "../../app/args.js";
import { eachSetting } from "../../config/settings.js";

const settings = eachSetting().map((s) => s.setting.env);
const parse = (...argv: string[]) => parseServerArgs(argv, settings);

describe("the server's command line", () => {
  it("knows its flags", () => {
    expect(parse()).toEqual({ kind: "serve" });
    expect(parse("--help")).toEqual({ kind: "help" });
    expect(parse("-h")).toEqual({ kind: "help" });
    expect(parse("--migrate")).toEqual({ kind: "migrate" });
    expect(parse("--migrate-down", "004_webhooks")).toEqual({ kind: "migrate-down", target: "004_webhooks" });
    expect(parse("--fetch-models")).toEqual({ kind: "fetch-models" });
  });

  it.each([
    [["--hlep"], "unknown argument '--hlep' (did you mean --help?)"],
    [["--fetch-model"], "unknown argument '--fetch-model' (did you mean --fetch-models?)"],
    [["--port", "9999"], "unknown argument '--port': settings are environment variables: PORT=9999 (--help lists them)"],
    [["--threads=4"], "unknown argument '--threads': settings are environment variables: THREADS=4 (--help lists them)"],
    [["--batch-dir", "/tmp/b"], "unknown argument '--batch-dir': settings are environment variables: BATCH_DIR=/tmp/b (--help lists them)"],
    [["--thread", "4"], "unknown argument '--thread': settings are environment variables (did you mean THREADS=4?; --help lists them)"],
    [
      ["serve"],
      "unknown argument 'serve': the server takes --help, --migrate, --migrate-down, --fetch-models; settings are environment variables (--help lists them)",
    ],
    [["--migrate-down"], "--migrate-down needs the version to go back to (--migrate-down 004_webhooks, or none for an empty schema)"],
    [["--migrate", "--fetch-models"], "--migrate --fetch-models: one of them at a time"],
  ])("refuses %j with one line, never ignores it", (argv, message) => {
    expect(parse(...argv)).toEqual({ kind: "usage", message });
  });
});
