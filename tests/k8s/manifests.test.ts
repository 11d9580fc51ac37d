// The Kubernetes manifests (k8s/): the base and the GPU overlay, rendered as kustomize renders them (resources,
// images, strategic-merge patches by name), each object validated against Kubernetes' own OpenAPI schemas
// (kubernetes-models), and held to what the service needs: probes on its routes, a grace period past the process's
// own shutdown bound, only settings the service declares, a migration job with the processes not migrating.
// Where `kubectl` is installed, `kubectl kustomize` renders the same objects.
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { Deployment } from "kubernetes-models/apps/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { Job } from "kubernetes-models/batch/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { ConfigMap, Secret, Service } from "kubernetes-models/v1";
import { describe, expect, it } from "vitest";
import YAML from "yaml";
import { eachSetting } from "../../config/settings.js";
import { repoRoot } from "../../testkit/repo-root.js";

type Obj = { apiVersion: string; kind: string; metadata: { name: string; labels?: Record<string, string> }; [k: string]: any };

const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  Deployment,
  HorizontalPodAutoscaler,
  Job,
  PodDisruptionBudget,
  ConfigMap,
  Secret,
  Service,
};

const docs = (file: string): Obj[] => YAML.parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJSON() as Obj);

/** Strategic merge as kustomize applies it to these objects: maps deep, lists of named items by name, others replaced. */
function merge(base: any, patch: any): any {
  if (Array.isArray(base) && Array.isArray(patch)) {
    if (!patch.every((p) => p && typeof p === "object" && "name" in p)) return patch;
    const out = base.map((b) => {
      const p = patch.find((x) => x.name === b.name);
      return p ? merge(b, p) : b;
    });
    for (const p of patch) if (!base.some((b) => b.name === p.name)) out.push(p);
    return out;
  }
  if (base && patch && typeof base === "object" && typeof patch === "object") {
    const out = { ...base };
    for (const [k, v] of Object.entries(patch)) out[k] = k in base ? merge(base[k], v) : v;
    return out;
  }
  return patch;
}

function render(dir: string): Obj[] {
  const k = YAML.parse(readFileSync(path.join(dir, "kustomization.yaml"), "utf8"));
  let objects: Obj[] = [];
  for (const r of k.resources ?? []) {
    const p = path.join(dir, r);
    objects.push(...(existsSync(path.join(p, "kustomization.yaml")) ? render(p) : docs(p)));
  }
  for (const patch of k.patches ?? []) {
    const [selKey, selValue] = String(patch.target.labelSelector).split("=");
    const body = docs(path.join(dir, patch.path))[0];
    const { metadata: _, ...change } = body;
    objects = objects.map((o) =>
      o.kind === patch.target.kind && o.spec?.template?.metadata?.labels?.[selKey] === selValue ? merge(o, change) : o,
    );
  }
  for (const img of k.images ?? []) {
    for (const o of objects)
      for (const c of [...(o.spec?.template?.spec?.containers ?? [])])
        if (c.image === img.name || c.image.startsWith(`${img.name}:`)) c.image = `${img.newName}:${img.newTag}`;
  }
  return objects;
}

const containersOf = (o: Obj): any[] => o.spec?.template?.spec?.containers ?? [];
/** The process bounds its own shutdown (app/main.ts): two grace periods and 15 s of slack at the defaults. */
const SHUTDOWN_BOUND_SECONDS = 2 * 10 + 15;

describe.each([
  ["base", "k8s/base"],
  ["GPU overlay", "k8s/overlays/gpu"],
])("the Kubernetes manifests (%s)", (_name, dir) => {
  const objects = render(path.join(repoRoot, dir));
  const byKind = (kind: string) => objects.filter((o) => o.kind === kind);

  it("validates every object against Kubernetes' schemas", () => {
    expect(objects.length).toBeGreaterThanOrEqual(10);
    for (const o of objects) {
      const Model = MODELS[o.kind];
      expect(Model, `${o.kind} ${o.metadata.name}`).toBeDefined();
      expect(() => new Model(o).validate(), `${o.kind} ${o.metadata.name}`).not.toThrow();
    }
    // Names are unique per kind, as the API server requires.
    const names = objects.map((o) => `${o.kind}/${o.metadata.name}`);
    expect(new Set(names).size).toBe(names.length);
  });

  it("gives the API and the workers probes on the service's routes, limits, and time to shut down", () => {
    const deployments = byKind("Deployment");
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual(["obi-api", "obi-worker-dedicated", "obi-worker-spot"]);
    for (const d of deployments) {
      expect(d.spec.template.spec.terminationGracePeriodSeconds, d.metadata.name).toBeGreaterThanOrEqual(SHUTDOWN_BOUND_SECONDS);
      // The selector picks the pods the template makes.
      for (const [k, v] of Object.entries(d.spec.selector.matchLabels)) expect(d.spec.template.metadata.labels[k]).toBe(v);
      for (const c of containersOf(d)) {
        expect(c.readinessProbe.httpGet.path).toBe("/ready");
        expect(c.livenessProbe.httpGet.path).toBe("/health");
        expect(c.resources.requests.cpu && c.resources.limits.cpu && c.resources.limits.memory, d.metadata.name).toBeTruthy();
        expect(c.env.find((e: any) => e.name === "ROLE")?.value).toBe(d.metadata.name === "obi-api" ? "api" : "worker");
      }
    }
    if (dir.includes("gpu"))
      for (const d of deployments.filter((x) => x.metadata.name.includes("worker"))) {
        expect(containersOf(d)[0].resources.limits["nvidia.com/gpu"]).toBe("1");
        expect(containersOf(d)[0].image).toBe("offline-batch-inference-gpu:latest");
        expect(containersOf(d)[0].env.find((e: any) => e.name === "GPU")?.value).toBe("cuda");
      }
  });

  it("sets only settings the service declares; the job migrates, the processes do not", () => {
    const config = byKind("ConfigMap")[0];
    const secret = byKind("Secret")[0];
    // Besides the settings: MODELS_FILE and MODEL_CONFIG are read before them (config/config.ts).
    const known = new Set([...eachSetting().map((e) => e.setting.env), "MODELS_FILE", "MODEL_CONFIG"]);
    for (const name of [...Object.keys(config.data), ...Object.keys(secret.stringData)]) expect(known.has(name), name).toBe(true);
    for (const d of [...byKind("Deployment"), ...byKind("Job")])
      for (const c of containersOf(d)) for (const e of c.env ?? []) expect(known.has(e.name), `${d.metadata.name} ${e.name}`).toBe(true);
    expect(config.data.MIGRATE).toBe("false");
    expect(config.data.MODEL_PATH).toMatch(/\.gguf$/);
    const job = byKind("Job")[0];
    expect(containersOf(job)[0].args).toEqual(["node", "dist/app/main.js", "--migrate"]);
    // The service's selector reaches the API pods; the PDBs and the HPA name what exists.
    const api = byKind("Deployment").find((d) => d.metadata.name === "obi-api")!;
    expect(byKind("Service")[0].spec.selector).toEqual(api.spec.selector.matchLabels);
    const hpa = byKind("HorizontalPodAutoscaler")[0];
    expect(byKind("Deployment").map((d) => d.metadata.name)).toContain(hpa.spec.scaleTargetRef.name);
    expect(hpa.spec.metrics[0].external.metric.name).toBe("obi_queue_depth");
    expect(byKind("PodDisruptionBudget")).toHaveLength(2);
  });

  it("renders the same objects with kubectl kustomize, where kubectl is installed", async () => {
    const kubectl = ["/usr/local/bin/kubectl", "/usr/bin/kubectl"].find((p) => existsSync(p));
    if (!kubectl) {
      console.warn("kubectl is not installed: the manifests are rendered by the test's own kustomize reading only");
      return;
    }
    const { stdout } = await promisify(execFile)(kubectl, ["kustomize", path.join(repoRoot, dir)]);
    const theirs = YAML.parseAllDocuments(stdout).map((d) => d.toJSON() as Obj);
    expect(theirs.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual(objects.map((o) => `${o.kind}/${o.metadata.name}`).sort());
  });
});
