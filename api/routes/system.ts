// Liveness, readiness and the service banner: open to everyone, cheap, no store access.
import { Router } from "express";
import type { BackendInfo } from "../../openai/backend.js";
import { modelNotReady } from "../errors.js";

export interface SystemRouteDeps {
  service: { name: string; version: string };
  backendInfo: () => BackendInfo | null;
  /** Every model of the registry and its state. */
  models?: () => Array<{ name: string; kind: string; state: string; batches: number }>;
  /** The status page's HTML, sent to a client that prefers text/html (a browser). */
  statusPage?: string;
}

export function systemRouter(deps: SystemRouteDeps): Router {
  const router = Router();

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

  // Ready once the backend is up (the model loaded); a load balancer should send no work before that.
  // The route is open, so the backend's settings carry no path or secret.
  router.get("/ready", (_req, res) => {
    const info = deps.backendInfo();
    if (!info) throw modelNotReady();
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
