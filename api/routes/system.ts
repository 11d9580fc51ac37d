// Liveness, readiness and the service banner: open to everyone and cheap. Readiness asks the state and the blob
// store whether they answer, at most once a second whatever the request rate.
import { Router } from "express";
import type { BackendInfo } from "../../openai/backend.js";
import { modelNotReady } from "../errors.js";

export interface SystemRouteDeps {
  service: { name: string; version: string };
  backendInfo: () => BackendInfo | null;
  /** Resolves while what the service keeps its state in answers; throws the domain's reason when it does not. */
  reachable?: () => Promise<void>;
  /** Every model of the registry and its state. */
  models?: () => Array<{ name: string; kind: string; state: string; batches: number }>;
  /** The status page's HTML, sent to a client that prefers text/html (a browser). */
  statusPage?: string;
}

const PROBE_MS = 1_000;

export function systemRouter(deps: SystemRouteDeps): Router {
  const router = Router();
  let probe: { at: number; result: Promise<void> } | undefined;
  const reachable = () => {
    if (!deps.reachable) return Promise.resolve();
    if (!probe || Date.now() - probe.at >= PROBE_MS) probe = { at: Date.now(), result: deps.reachable() };
    return probe.result;
  };

  // curl (Accept: */*) and SDKs prefer JSON; a browser gets the status page.
  router.get("/", (req, res) => {
    res.vary("Accept");
    if (deps.statusPage && req.accepts(["json", "html"]) === "html") {
      res.type("html").setHeader("cache-control", "no-store");
      res.send(deps.statusPage);
      return;
    }
    res.json({ status: "ok", service: deps.service.name, version: deps.service.version, docs: "/docs" });
  });

  // The process answers: nothing more is checked, so an orchestrator restarts only a dead process.
  router.get("/health", (_req, res) => {
    res.json({ status: "ok" });
  });

  // Ready once the backend is up (the model loaded) and while the database and the blob store answer; a load
  // balancer should send no work before that, nor during an outage (503 with the reason and Retry-After).
  // The route is open, so the backend's settings carry no path or secret.
  router.get("/ready", async (_req, res) => {
    const info = deps.backendInfo();
    if (!info) throw modelNotReady();
    await reachable();
    res.json({
      status: "ready",
      model: info.model,
      backend: {
        kind: info.kind,
        endpoints: info.endpoints,
        concurrency: info.concurrency,
        generated_model: info.generatedModel,
        settings: info.settings,
      },
      models: (deps.models?.() ?? []).map(({ name, kind, state, batches }) => ({ name, kind, state, batches })),
    });
  });

  return router;
}
