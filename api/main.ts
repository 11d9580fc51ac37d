// Entry point: validate config, build the service, listen, and shut down cleanly on signals.
import { ConfigError, loadConfig } from "./config.js";
import { createLogger } from "./logger.js";
import { createService } from "./service.js";

async function main() {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`offline-batch-inference: ${err.message}`);
      process.exit(1);
    }
    throw err;
  }
  const logger = createLogger(config.logLevel);
  if (config.apiKeys.length === 0) {
    logger.warn("API_KEYS is not set: the API is OPEN to anyone who can reach it; set API_KEYS=key1,key2 to require keys");
  } else {
    logger.info({ keys: config.apiKeys.length }, "API key authentication on");
  }
  const service = await createService(config, logger);
  // Express 5 calls this back with the error too (e.g. EADDRINUSE), not only on success.
  const server = service.app.listen(config.port, config.host, (err?: Error) => {
    if (err) {
      logger.fatal({ err }, `cannot listen on ${config.host}:${config.port}`);
      process.exit(1);
    }
    const addr = server.address();
    const port = typeof addr === "object" && addr ? addr.port : config.port;
    logger.info({ host: config.host, port, batchDir: config.batchDir }, `listening on http://${config.host}:${port} (docs at /docs)`);
  });

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      // State files are only ever replaced by rename, so exiting now cannot tear them.
      logger.warn({ signal }, "second signal: exiting now");
      process.exit(130);
    }
    stopping = true;
    logger.info({ signal }, "shutting down: no new requests, checkpointing running batches");
    server.close();
    server.closeIdleConnections?.();
    service
      .close({ graceMs: 10_000 })
      .then(() => {
        logger.info("shutdown complete");
        process.exit(0);
      })
      .catch((err) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      });
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
}

main().catch((err) => {
  console.error("offline-batch-inference: failed to start:", err instanceof Error ? err.message : err);
  process.exit(1);
});
