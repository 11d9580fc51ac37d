// What each route module gives the app and the OpenAPI document alike: its handlers and its documented paths,
// so neither can list a route the other lacks.
import type { OpenAPIRegistry } from "@asteasolutions/zod-to-openapi";
import type { Router } from "express";
import type { AppDeps } from "../http/app-deps.js";
import type { ServiceInfo } from "../http/service-info.js";

export type RouteDeps = AppDeps & { service: ServiceInfo };

/** What the document's examples take from the deployment that serves it, so "Try it out" runs them as they are. */
export interface DocContext {
  /** The model a request names by default here (the registry's default, else its first). */
  model: string;
}

/** The examples' model where no deployment is known (the route table of docs/api.md, tests). */
export const DOC_DEFAULTS: DocContext = { model: "stories260K" };

export interface RouteModule {
  /** The module's own URL (`import.meta.url`): the route table of docs/api.md names each route's file. */
  source: string;
  /** The handlers over what they need of the deps; undefined where this deployment lacks it (no upload store). */
  router(deps: RouteDeps): Router | undefined;
  paths(registry: OpenAPIRegistry, ctx: DocContext): void;
}
