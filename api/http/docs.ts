// /openapi.json and Swagger UI at /docs. The UI's assets come from the swagger-ui-dist package on
// disk (no CDN), so the page works on a machine without internet.
import { Router } from "express";

/** `document`: the OpenAPI document, built on the first request that shows it. */
export function docsRouter(document: () => object): Router {
  const router = Router();

  router.get("/openapi.json", (_req, res) => {
    res.json(document());
  });

  // The page loads its assets by relative URL ("./swagger-ui.css"), which only resolve under "/docs/".
  router.get("/docs", (req, res, next) => {
    if (req.originalUrl.split("?")[0].endsWith("/")) return next();
    const query = req.originalUrl.slice(req.originalUrl.split("?")[0].length);
    // Relative, so it stays right behind a reverse proxy that mounts the service under a prefix.
    res.redirect(301, `docs/${query}`);
  });
  // Imported on the first visit: the UI's package is a tenth of a second of every start, and most never show it.
  let ui: Promise<Router> | null = null;
  router.use("/docs", (req, res, next) => {
    ui ??= swaggerUiRouter(document());
    ui.then((r) => r(req, res, next), next);
  });

  return router;
}

async function swaggerUiRouter(document: object): Promise<Router> {
  const { default: swaggerUi } = await import("swagger-ui-express");
  // serveFiles (not `serve` + a module-level doc): each app instance serves its own document.
  return Router().use(swaggerUi.serveFiles(document), swaggerUi.setup(document, { customSiteTitle: "Offline batch inference API" }));
}
