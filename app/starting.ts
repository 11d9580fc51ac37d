// What the port answers while the service starts (its models downloading or loading, its database being reached):
// /health 200 that the process is alive, /ready 503 `starting` with each download's progress (bytes, rate, time
// left), every other route 503 `starting` with Retry-After, so an orchestrator's probes and a user's curl see why the
// service is not up yet, on the port the service then serves.
import type { IncomingMessage, ServerResponse } from "node:http";
import { starting } from "../api/errors.js";
// From the downloader itself, not backends/build.js, which loads the engine: this page answers while it loads.
import { type DownloadStatus, formatBytes, progressLine } from "../engine/load/model-download.js";

export class StartupStatus {
  private readonly downloads = new Map<string, DownloadStatus>();

  /** A download's progress (buildService's onDownload). */
  readonly onDownload = (status: DownloadStatus): void => {
    this.downloads.set(status.file, status);
  };

  /** The request listener of the port until the service takes it over. */
  readonly answer = (req: IncomingMessage, res: ServerResponse): void => {
    const path = (req.url ?? "/").split("?")[0];
    // Alive, not ready: a liveness probe must not restart a process that is downloading or loading its model.
    if (path === "/health") {
      send(res, 200, { status: "starting" }, {});
      return;
    }
    if (path === "/ready") {
      const err = starting(this.now());
      send(res, err.status, this.readyBody(err.toBody()), err.headers);
      return;
    }
    const now = this.now();
    const err = starting(now && `The server is starting: ${lower(now)} GET /ready shows the progress.`);
    send(res, err.status, err.toBody(), err.headers);
  };

  /** What the start waits for, as a sentence; undefined once no download is left (the default message says the rest). */
  private now(): string | undefined {
    const active = [...this.downloads.values()].find((d) => d.state !== "done");
    if (!active) return undefined;
    if (active.state === "waiting") return `Waiting for another process's download of ${active.model}.`;
    if (active.state === "checking") return `Checking the download of ${active.model} (${formatBytes(active.totalBytes)}).`;
    return `${progressLine(active).replace(/^downloading/, "Downloading")}.`;
  }

  private readyBody(body: object) {
    return {
      ...body,
      status: "starting",
      downloads: [...this.downloads.values()].map((d) => ({
        model: d.model,
        file: d.file,
        state: d.state,
        bytes: d.bytes,
        total_bytes: d.totalBytes,
        bytes_per_second: d.bytesPerSecond,
        eta_seconds: d.etaSeconds,
      })),
    };
  }
}

const lower = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string>): void {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", ...headers });
  res.end(JSON.stringify(body));
}
