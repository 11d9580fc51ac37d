// What the port answers while the service starts (its models downloading or loading): /health that the process is
// alive, /ready 503 with each download's progress (bytes, rate, time left), every other route 503 `starting`, so an
// orchestrator's probes and a user's curl see why the service is not up yet.
import type { IncomingMessage, ServerResponse } from "node:http";
import { starting } from "../api/errors.js";
import { type DownloadStatus, progressLine } from "../backends/build.js";

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
    const err = starting(this.why());
    send(res, err.status, path === "/ready" ? this.readyBody(err.toBody()) : err.toBody(), err.headers);
  };

  private why(): string | undefined {
    const active = [...this.downloads.values()].find((d) => d.state !== "done");
    if (!active) return undefined;
    if (active.state === "waiting") return `The server is starting: it waits for another process's download of ${active.model}.`;
    return `The server is starting: ${progressLine(active)}. GET /ready shows the progress.`;
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

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string>): void {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", ...headers });
  res.end(JSON.stringify(body));
}
