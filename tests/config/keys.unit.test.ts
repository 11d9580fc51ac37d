import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig, webhookEndpoints } from "../../config/config.js";
import { bareKey, FILE_STORAGE_DEFAULT_BYTES, KeyRing, sha256Hex } from "../../config/keys.js";
import { repoRoot } from "../../testkit/repo-root.js";

const dir = mkdtempSync(path.join(os.tmpdir(), "obi-keys-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (text: string) => {
  const f = path.join(dir, `k${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(f, text);
  return f;
};
const HASH = sha256Hex("sk-one");

describe("the keys file", () => {
  it("reads the shipped example: ids, admin flag, weights, limits, webhooks; its example secrets are the hashed ones", () => {
    const config = loadConfig({ KEYS_FILE: path.join(repoRoot, "examples/keys.yaml") });
    expect(config.keys.map((k) => [k.id, k.admin, k.weight])).toEqual([
      ["ops", true, 1],
      ["labeling", false, 1],
      ["evals", false, 2],
    ]);
    const ring = new KeyRing(config.keys);
    const labeling = config.keys[1];
    expect(labeling.sha256).toBe(sha256Hex("sk-example-labeling"));
    expect(ring.limitOf(labeling.owner, "qwen2.5-7b")).toBe(500_000);
    expect(ring.limitOf(labeling.owner, "anything")).toBe(2_000_000);
    expect(ring.limitOf(config.keys[0].owner, "anything")).toBeUndefined();
    expect(ring.weights()).toEqual({ [config.keys[2].owner]: 2 });
    // A key's webhook is where its own batches' events go (WEBHOOKS_BY_KEY's, for the file's keys).
    const hooks = webhookEndpoints(config).byOwner;
    expect(hooks.get(config.keys[2].owner)?.url).toBe("https://evals.example.com/hooks/batches");
    expect(hooks.has(labeling.owner)).toBe(false);
    expect(ring.of(config.keys[2].owner)?.stopRules).toMatchObject({ maxErrorRate: 0.2 });
    expect(() => loadConfig({ KEYS_FILE: file(`keys:\n  - id: a\n    sha256: ${HASH}\n    stop_rules: { max_error_rate: 2 }\n`) })).toThrow(
      /keys\[0\] \(a\): stop_rules\.max_error_rate: must be at most 1/,
    );
    // With keys, the API listens on every interface, as with API_KEYS.
    expect(config.host).toBe("0.0.0.0");
  });

  it("keeps API_KEYS working beside it: bare keys are named by their hash, not admins, unlimited", () => {
    const config = loadConfig({ API_KEYS: "k1", KEYS_FILE: file(`keys:\n  - id: a\n    sha256: ${HASH}\n`) });
    expect(config.keys.map((k) => k.id)).toEqual([bareKey("k1").id, "a"]);
    expect(bareKey("k1")).toMatchObject({ id: `key_${sha256Hex("k1").slice(0, 8)}`, admin: false, weight: 1, limits: {} });
    expect(new KeyRing(config.keys).idOf(bareKey("k1").owner)).toBe(bareKey("k1").id);
  });

  it("bounds each key's file storage: its own file_storage_limit_bytes, else 10 GiB", () => {
    const config = loadConfig({
      API_KEYS: "k1",
      KEYS_FILE: file(
        `keys:\n  - id: a\n    sha256: ${HASH}\n    file_storage_limit_bytes: 5000\n  - id: b\n    sha256: ${sha256Hex("sk-b")}\n`,
      ),
    });
    expect(config.keys.map((k) => [k.id, k.fileStorageBytes])).toEqual([
      [bareKey("k1").id, FILE_STORAGE_DEFAULT_BYTES],
      ["a", 5000],
      ["b", 10 * 1024 ** 3],
    ]);
    expect(() => loadConfig({ KEYS_FILE: file(`keys:\n  - id: a\n    sha256: ${HASH}\n    file_storage_limit_bytes: 0\n`) })).toThrow(
      /keys\[0\] \(a\): file_storage_limit_bytes: must be a whole number of bytes >= 1/,
    );
  });

  it("refuses bad entries at start, one line each, naming the entry and never a secret", () => {
    const bad = file(
      [
        "keys:",
        "  - id: a",
        "    sha256: not-a-hash",
        "  - id: b",
        `    sha256: ${HASH}`,
        "    weight: 0",
        "  - id: c",
        `    sha256: ${sha256Hex("sk-two")}`,
        "    enqueued_token_limits: { small: -5 }",
        "  - id: d",
        `    sha256: ${sha256Hex("sk-three")}`,
        "    color: red",
        "  - id: bad id!",
        `    sha256: ${sha256Hex("sk-four")}`,
      ].join("\n"),
    );
    let message = "";
    try {
      loadConfig({ KEYS_FILE: bad });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      message = (err as Error).message;
    }
    const lines = message.split("\n");
    expect(lines).toHaveLength(5);
    expect(lines[0]).toMatch(/keys\[0\] \(a\): sha256: must be the secret's sha256/);
    expect(lines[1]).toMatch(/keys\[1\] \(b\): weight: must be above 0/);
    expect(lines[2]).toMatch(/keys\[2\] \(c\): enqueued_token_limits\.small: must be a whole number >= 1/);
    expect(lines[3]).toMatch(/keys\[3\] \(d\): entry: .*color/);
    expect(lines[4]).toMatch(/keys\[4\] \(bad id!\): id: must be/);
  });

  it("refuses a secret given twice, an id given twice, a file that is not a list of keys, and a webhook without a good secret", () => {
    expect(() => loadConfig({ API_KEYS: "sk-one", KEYS_FILE: file(`keys:\n  - id: a\n    sha256: ${HASH}\n`) })).toThrow(
      new RegExp(`keys ${bareKey("sk-one").id} and a have the same secret`),
    );
    const twice = `keys:\n  - id: a\n    sha256: ${HASH}\n  - id: a\n    sha256: ${sha256Hex("x")}\n`;
    expect(() => loadConfig({ KEYS_FILE: file(twice) })).toThrow(/the id a is given to more than one key/);
    expect(() => loadConfig({ KEYS_FILE: file("- just a list") })).toThrow(/must hold "keys:"/);
    // A misspelt key is refused, named with the one meant, never ignored.
    expect(() => loadConfig({ KEYS_FILE: file(`key:\n  - id: a\n    sha256: ${HASH}\n`) })).toThrow(
      /: unknown key 'key' \(did you mean 'keys'\?\)$/,
    );
    expect(() => loadConfig({ KEYS_FILE: file(`keys:\n  - id: a\n    sha256: ${HASH}\n    admn: true\n`) })).toThrow(
      /keys\[0\] \(a\): entry: unknown key 'admn' \(did you mean 'admin'\?\)$/,
    );
    expect(() =>
      loadConfig({ KEYS_FILE: file(`keys:\n  - id: a\n    sha256: ${HASH}\n    stop_rules: { max_eror_rate: 0.1 }\n`) }),
    ).toThrow(/keys\[0\] \(a\): stop_rules: unknown key 'max_eror_rate' \(did you mean 'max_error_rate'\?\)$/);
    expect(() => loadConfig({ KEYS_FILE: path.join(dir, "missing.yaml") })).toThrow(/cannot be read/);
    const hook = `keys:\n  - id: a\n    sha256: ${HASH}\n    webhook: { url: "https://x.example/h", secret: "nope" }\n`;
    expect(() => loadConfig({ KEYS_FILE: file(hook) })).toThrow(/KEYS_FILE: key a: webhook\.secret: must be whsec_/);
    const noKeys = file("keys: []\n");
    expect(() => loadConfig({ KEYS_FILE: noKeys, REQUIRE_API_KEYS: "true" })).toThrow(/neither API_KEYS nor KEYS_FILE gives a key/);
    // Keys asked for but none given never open the API beyond loopback.
    expect(() => loadConfig({ KEYS_FILE: noKeys, HOST: "0.0.0.0" })).toThrow(
      `invalid configuration: KEYS_FILE ${noKeys} holds no key, so the API would be open to whoever reaches HOST=0.0.0.0; add a key (npm run keys -- new <id>) or listen on 127.0.0.1`,
    );
    expect(() => loadConfig({ API_KEYS: " , ", HOST: "::" })).toThrow(
      /^invalid configuration: API_KEYS holds no key, so the API would be open/,
    );
    expect(loadConfig({ KEYS_FILE: noKeys }).host).toBe("127.0.0.1");
    expect(loadConfig({ KEYS_FILE: noKeys, HOST: "127.0.0.1" }).keys).toEqual([]);
  });
});
