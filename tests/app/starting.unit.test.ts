// What the port answers while the service starts, in each of the start's moments: a download waiting for another
// process's, downloading, being checked, and the model loading once every download is done. /health is 200 all
// along; /ready and every other route 503 `starting` with Retry-After, /ready with the downloads beside the error.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StartupStatus } from "../../app/starting.js";
import type { DownloadStatus } from "../../backends/build.js";

const status = new StartupStatus();
let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer(status.answer);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const download = (over: Partial<DownloadStatus>): DownloadStatus => ({
  model: "hf:Owner/Repo-GGUF:Q8_0",
  file: "Owner_Repo-GGUF.Q8_0-0123456789.gguf",
  state: "downloading",
  bytes: 210e6,
  totalBytes: 676e6,
  bytesPerSecond: 12.5e6,
  etaSeconds: 37,
  ...over,
});
const get = async (path: string) => {
  const res = await fetch(`${base}${path}`);
  return { status: res.status, retryAfter: res.headers.get("retry-after"), body: (await res.json()) as any };
};

describe("the port while the service starts", () => {
  it("says the model is loading (or the database being reached) before any download, and is alive", async () => {
    expect(await get("/health")).toEqual({ status: 200, retryAfter: null, body: { status: "starting" } });
    const ready = await get("/ready");
    expect(ready).toMatchObject({ status: 503, retryAfter: "5", body: { status: "starting", downloads: [] } });
    expect(ready.body.error).toEqual({
      message: "The server is starting: its model is loading, or it is reaching its database. Retry shortly.",
      type: "server_error",
      param: null,
      code: "starting",
    });
    expect((await get("/v1/batches")).body.error.code).toBe("starting");
  });

  it("shows a download's progress: the bar on /ready with the figures beside it, a sentence elsewhere", async () => {
    status.onDownload(download({}));
    const ready = await get("/ready");
    expect(ready.body.error.message).toBe(
      "Downloading hf:Owner/Repo-GGUF:Q8_0 [######..............] 31% 210 MB of 676 MB, 13 MB/s, 37 s left.",
    );
    expect(ready.body.downloads).toEqual([
      {
        model: "hf:Owner/Repo-GGUF:Q8_0",
        file: "Owner_Repo-GGUF.Q8_0-0123456789.gguf",
        state: "downloading",
        bytes: 210e6,
        total_bytes: 676e6,
        bytes_per_second: 12.5e6,
        eta_seconds: 37,
      },
    ]);
    const other = await get("/v1/models?limit=1");
    expect(other).toMatchObject({ status: 503, retryAfter: "5" });
    expect(other.body.error.message).toBe(
      "The server is starting: downloading hf:Owner/Repo-GGUF:Q8_0 [######..............] 31% 210 MB of 676 MB, 13 MB/s, 37 s left. GET /ready shows the progress.",
    );
    expect((await get("/health")).status).toBe(200);
  });

  it("says when it waits for another process's download, and when it checks one", async () => {
    status.onDownload(download({ state: "waiting", bytes: 0, bytesPerSecond: 0, etaSeconds: null }));
    expect((await get("/ready")).body.error.message).toBe("Waiting for another process's download of hf:Owner/Repo-GGUF:Q8_0.");
    status.onDownload(download({ state: "checking", bytes: 676e6 }));
    expect((await get("/ready")).body.error.message).toBe("Checking the download of hf:Owner/Repo-GGUF:Q8_0 (676 MB).");
  });

  it("goes back to the load's sentence once the downloads are done, still listing them", async () => {
    status.onDownload(download({ state: "done", bytes: 676e6, etaSeconds: 0 }));
    const ready = await get("/ready");
    expect(ready.body.error.message).toMatch(/^The server is starting: its model is loading/);
    expect(ready.body.downloads).toEqual([expect.objectContaining({ state: "done", bytes: 676e6 })]);
  });
});
