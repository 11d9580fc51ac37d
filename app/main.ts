// Entry point: validate config, build the service, listen, and shut down cleanly on signals. The service's modules
// (the engine, the stores, the tables) are imported only once the settings hold and the port is taken, so a mistake
// in the settings, --help and the one-off commands answer without loading them.
import { createServer, type RequestListener, type Server } from "node:http";
import os from "node:os";
import type pino from "pino";
import { applyServerLimits } from "../api/http/server.js";
import { type Config, ConfigError, checkPaths, isLoopbackHost as isLoopback, loadConfig } from "../config/config.js";
import { eachSetting, settingsHelp } from "../config/settings.js";
import { parseServerArgs, SERVER_FLAGS_HELP } from "./args.js";
import { createLogger } from "./logger.js";
import type { Service } from "./service.js";
import { onStopSignals } from "./signals.js";
import { StartupStatus } from "./starting.js";

/** Beyond the drain and checkpoint: flushing state and releasing the model. */
const SHUTDOWN_SLACK_MS = 15_000;

type ServerCommand = ReturnType<typeof parseServerArgs>;
type OnStop = (signal: NodeJS.Signals, again: boolean) => void;

async function main() {
  const command = readCommand();
  if (!command) return;
  const config = configOrExit();
  const logger = createLogger(config.logLevel);
  if (command.kind === "migrate" || command.kind === "migrate-down") return await migrate(config, logger, command);
  logKeys(config, logger);
  if (command.kind === "fetch-models") return await (await import("./fetch-models.js")).fetchModels(config, logger);
  await serve(config, logger);
}

/** The command line's command; a usage error exits 2, and --help prints the settings and flags (null: done). */
function readCommand(): Exclude<ServerCommand, { kind: "usage" | "help" }> | null {
  const command = parseServerArgs(
    process.argv.slice(2),
    eachSetting().map((s) => s.setting.env),
  );
  if (command.kind === "usage") {
    console.error(`offline-batch-inference: ${command.message}`);
    process.exit(2);
  }
  if (command.kind === "help") {
    console.log(`${settingsHelp()}\n\n${SERVER_FLAGS_HELP}`);
    return null;
  }
  return command;
}

/** The settings, validated; a bad one exits 1 with one line naming it. */
function configOrExit(): Config {
  try {
    const config = loadConfig();
    checkPaths(config);
    return config;
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`offline-batch-inference: ${err.message}`);
      process.exit(1);
    }
    throw err;
  }
}

/**
 * The migration job (Kubernetes runs it before the processes, which then start with MIGRATE=false), or its reverse
 * before going back to an older release.
 */
async function migrate(config: Config, logger: pino.Logger, command: Extract<ServerCommand, { kind: "migrate" | "migrate-down" }>) {
  if (!config.cluster.databaseUrl) {
    console.error("offline-batch-inference: --migrate needs DATABASE_URL (the one-process mode has no schema)");
    process.exit(1);
  }
  const target = command.kind === "migrate-down" ? command.target : undefined;
  try {
    const { migrateSchema } = await import("./plane-state.js");
    const done = await migrateSchema(config.cluster.databaseUrl, logger, target);
    if (target === undefined) logger.info({ applied: done }, done.length > 0 ? "migrations applied" : "the schema is current");
    else logger.info({ reverted: done, to: target }, done.length > 0 ? "migrations reverted" : "nothing newer to revert");
  } catch (err) {
    console.error(`offline-batch-inference: ${(err as Error).message}`);
    process.exit(1);
  }
}

/** Whether the API asks for keys, said at the start: an open API is warned of. */
function logKeys(config: Config, logger: pino.Logger) {
  if (config.keys.length === 0) {
    logger.warn(
      isLoopback(config.host)
        ? `API_KEYS is not set: the API has no keys, so it listens on ${config.host} only; set API_KEYS=key1,key2 or KEYS_FILE to require keys and listen on every interface (or HOST=0.0.0.0 to open it without keys)`
        : `API_KEYS is not set: the API is OPEN to anyone who can reach ${config.host}; set API_KEYS=key1,key2 or KEYS_FILE to require keys`,
    );
  } else {
    const admins = config.keys.filter((k) => k.admin).map((k) => k.id);
    logger.info({ keys: config.keys.length, admins }, "API key authentication on");
  }
}

/** Listens at once, answering `starting` while the service is built, then serves it until a stop signal. */
async function serve(config: Config, logger: pino.Logger) {
  // A stop during the start (a model load of minutes) ends the process at once: nothing runs yet to drain or
  // checkpoint (and node as a container's pid 1 would otherwise ignore SIGTERM until the load ends).
  let running: OnStop | undefined;
  onStopSignals((signal, again) => {
    if (running) return running(signal, again);
    logger.info({ signal }, "stopped while starting: exiting");
    logger.flush(() => process.exit(128 + (os.constants.signals[signal] ?? 15)));
  });
  // The port is taken before the model loads (minutes for a large one), so a port in use is said at once; until the
  // service is built, every request is answered 503 `starting`.
  const status = new StartupStatus();
  const server = await listenFirst(config, logger, status.answer);
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : config.port;
  logger.info(
    { host: config.host, port },
    `starting on http://${config.host}:${port}: /health answers already, /ready says what the start waits for (a download's progress, the model's load)`,
  );
  const { buildService } = await import("./service.js");
  const service = await buildService(config, logger, { onDownload: status.onDownload });
  server.off("request", status.answer);
  server.on("request", service.app);
  logger.info({ host: config.host, port, batchDir: config.batchDir }, `listening on http://${config.host}:${port} (docs at /docs)`);
  advertise(config, logger, service, port);
  running = stopping(config, logger, server, service);
}

/** Tells the API servers where this process's workers take synchronous requests, warning where only this machine can reach it. */
function advertise(config: Config, logger: pino.Logger, service: Service, port: number) {
  const advertised = `http://${reachableHost(config.host)}:${port}`;
  service.controlPlane.advertise(advertised);
  const { cluster } = config;
  if (cluster.databaseUrl && cluster.role !== "api" && !cluster.workerUrl && isLoopback(config.host))
    logger.warn(
      { advertised },
      `this worker tells the API servers to send it synchronous requests at ${advertised}: only those on this machine can; on several machines set HOST=0.0.0.0 (API_KEYS makes it the default) or WORKER_URL`,
    );
}

/** What a stop signal does once the service runs: drain (SIGTERM), then shut down; a second signal exits at once. */
function stopping(config: Config, logger: pino.Logger, server: Server, service: Service): OnStop {
  return (signal, again) => {
    const code = 128 + (os.constants.signals[signal] ?? 15);
    if (again) {
      // State files are only ever replaced by rename and result lines are whole single writes, so
      // exiting now can at most leave a *.tmp file or a torn last line, both cleaned up on start.
      logger.warn({ signal }, "second signal: exiting now");
      process.exit(code);
    }
    const graceMs = config.shutdownGraceSeconds * 1000;
    // An orchestrator's SIGTERM comes while load balancers may still send this process new connections: it
    // goes on serving them, with /ready failing, until they have seen it go. Ctrl-C (SIGINT) stops at once.
    const drainMs = signal === "SIGTERM" ? config.shutdownDrainSeconds * 1000 : 0;
    if (drainMs > 0) {
      service.drain();
      logger.info(
        { signal, drain_seconds: config.shutdownDrainSeconds },
        "draining: /ready answers 503 and requests are still served, then the shutdown begins (a second signal exits at once)",
      );
    }
    setTimeout(() => {
      logger.info(
        { signal, grace_seconds: config.shutdownGraceSeconds },
        "shutting down: no new connections or batches, requests in flight may finish, then running batches are checkpointed (a second signal exits at once)",
      );
      shutDown(logger, server, service, graceMs);
    }, drainMs);
  };
}

/** Closes the server and the service, and exits: 0 once closed, 1 on a failure or past the bound. */
function shutDown(logger: pino.Logger, server: Server, service: Service, graceMs: number) {
  server.close();
  server.closeIdleConnections?.();
  // Whatever hangs (a stuck disk, the native engine), the process still ends in bounded time.
  setTimeout(
    () => {
      logger.error("shutdown did not finish in time: exiting");
      process.exit(1);
    },
    2 * graceMs + SHUTDOWN_SLACK_MS,
  ).unref();
  service
    .close({ graceMs })
    .then(() => {
      logger.info("shutdown complete");
      process.exit(0);
    })
    .catch((err) => {
      logger.error({ err }, "shutdown failed");
      process.exit(1);
    });
}

/** The HTTP server, listening with its limits, its answers `starting` until the service takes them over; or exit 1 with one line. */
async function listenFirst(config: Config, logger: pino.Logger, answer: RequestListener): Promise<Server> {
  const server = createServer(answer);
  applyServerLimits(server, config.http);
  const err = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    server.once("error", resolve);
    server.listen(config.port, config.host, () => {
      server.off("error", resolve);
      resolve(undefined);
    });
  });
  if (!err) return server;
  const why =
    err.code === "EADDRINUSE"
      ? "the port is already in use; set PORT to a free one"
      : err.code === "EACCES"
        ? "permission denied; use a port above 1023"
        : err.message;
  // The reason is the last line a reader sees: the log lines just written (stdout) are flushed and given a moment to
  // be read before it goes to stderr.
  return new Promise<never>(() =>
    logger.flush(() =>
      setTimeout(() => {
        console.error(`offline-batch-inference: cannot listen on ${config.host}:${config.port}: ${why}`);
        process.exit(1);
      }, 100),
    ),
  );
}

main().catch((err) => {
  console.error("offline-batch-inference: failed to start:", err instanceof Error ? err.message : err);
  process.exit(1);
});

/** An address other processes reach this one at: the host it listens on, or where that is every interface, its first network address. */
function reachableHost(host: string): string {
  if (host !== "0.0.0.0" && host !== "::") return host.includes(":") ? `[${host}]` : host;
  const ipv4 = Object.values(os.networkInterfaces())
    .flat()
    .find((a) => a && a.family === "IPv4" && !a.internal);
  return ipv4?.address ?? os.hostname();
}
