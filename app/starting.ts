// The port while a start downloads its models: /health answers, /ready answers 503 with each download's progress
// (bytes, rate, time left) and every other route 503 model_not_ready, so an orchestrator's probes and a user's curl
// see why the service is not up yet. Opened when the first download begins, closed just before the service listens.
import { createServer, type Server, type ServerResponse } from "node:http";
import type pino from "pino";
import { modelNotReady } from "../api/errors.js";
import { type DownloadStatus, progressLine } from "../backends/build.js";
import type { Config } from "../config/config.js";

export class StartupStatus {
  private readonly downloads = new Map<string, DownloadStatus>();
  private server?: Server;

  constructor(
    private readonly config: Pick<Config, "host" | "port">,
    private readonly logger: pino.Logger,
  ) {}

  /** A download's progress (buildService's onDownload): the first one opens the port. */
  readonly onDownload = (status: DownloadStatus): void => {
    this.downloads.set(status.file, status);
    this.server ??= this.open();
  };

  /** Frees the port for the service (nothing if no download opened it). */
  async close(): Promise<void> {
    const server = this.server;
    if (!server?.listening) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** What GET /ready answers while starting. */
  readyBody() {
    const list = [...this.downloads.values()];
    const active = list.find((d) => d.state !== "done");
    const message = active
      ? active.state === "waiting"
        ? `Waiting for another process's download of ${active.model}.`
        : `${progressLine(active).replace(/^downloading/, "Downloading")}.`
      : "The model is loading.";
    return {
      ...modelNotReady(message).toBody(),
      status: "starting",
      downloads: list.map((d) => ({
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

  private open(): Server {
    const server = createServer((req, res) => {
      const path = (req.url ?? "/").split("?")[0];
      if (req.method === "GET" && path === "/health") return send(res, 200, { status: "ok" });
      if (path === "/ready") return send(res, 503, this.readyBody());
      send(res, 503, modelNotReady("The service is starting: its model is being downloaded. GET /ready shows the progress.").toBody());
    });
    server.on("error", (err) =>
      // The service's own listen reports the port's problem once the models are up; the download goes on meanwhile.
      this.logger.warn({ err }, `cannot answer on ${this.config.host}:${this.config.port} while the model downloads`),
    );
    server.listen(this.config.port, this.config.host, () => {
      const addr = server.address();
      const port = typeof addr === "object" && addr ? addr.port : this.config.port;
      this.logger.info(
        { host: this.config.host, port },
        `starting: http://${this.config.host}:${port}/ready shows the download's progress`,
      );
    });
    return server;
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", ...(status === 503 ? { "retry-after": "5" } : {}) });
  res.end(JSON.stringify(body));
}
