// The Kubernetes manifests (k8s/) as `kubectl kustomize` renders them: the base, the GPU overlay and the example
// overlay, each object validated against Kubernetes' own OpenAPI schemas (kubernetes-models), and the rendered
// fields held to what an operator expects: GPUs on the GPU workers, hardened pods, no Secret in the base, versioned
// images, migrations that run at every rollout, and a shutdown the grace period covers.
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { Deployment } from "kubernetes-models/apps/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { ConfigMap, Secret, Service } from "kubernetes-models/v1";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import YAML from "yaml";
import { ConfigError, checkModelRef, loadConfig } from "../../config/config.js";
import { eachSetting } from "../../config/settings.js";
import { repoRoot } from "../../testkit/repo-root.js";

type Obj = { apiVersion: string; kind: string; metadata: { name: string; labels?: Record<string, string> }; [k: string]: any };

const KUBECTL = ["/usr/local/bin/kubectl", "/usr/bin/kubectl"].find((p) => existsSync(p));
if (!KUBECTL) console.warn("kubectl is not installed: the Kubernetes manifests' tests skip (they render with `kubectl kustomize`)");

const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  Deployment,
  HorizontalPodAutoscaler,
  PodDisruptionBudget,
  ConfigMap,
  Secret,
  Service,
};

async function render(dir: string): Promise<Obj[]> {
  const { stdout } = await promisify(execFile)(KUBECTL!, ["kustomize", dir]);
  return YAML.parseAllDocuments(stdout).map((d) => d.toJSON() as Obj);
}

const VERSION = JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")).version as string;
const podOf = (o: Obj) => o.spec.template.spec;
const allContainers = (o: Obj): any[] => [...(podOf(o).initContainers ?? []), ...podOf(o).containers];
const envOf = (c: any, name: string) => c.env?.find((e: any) => e.name === name);
/** The process's own bound on a stop: the drain, two grace periods and 15 s of slack (app/main.ts), at the defaults. */
const shutdownBound = (drain: number) => drain + 2 * 10 + 15;

const OVERLAYS = [
  ["base", "k8s/base"],
  ["GPU overlay", "k8s/overlays/gpu"],
  ["example overlay", "k8s/overlays/example"],
] as const;

describe.skipIf(!KUBECTL).each(OVERLAYS)("the Kubernetes manifests (%s)", (name, dir) => {
  let objects: Obj[] = [];
  beforeAll(async () => {
    objects = await render(path.join(repoRoot, dir));
  });
  const byKind = (kind: string) => objects.filter((o) => o.kind === kind);
  const deployments = () => byKind("Deployment");
  const workers = () => deployments().filter((d) => d.metadata.name.startsWith("obi-worker-"));
  const config = () => byKind("ConfigMap")[0].data as Record<string, string>;

  it("validates every object against Kubernetes' schemas, and has no Job to collide with on the next apply", () => {
    expect(objects.length).toBeGreaterThanOrEqual(8);
    for (const o of objects) {
      const Model = MODELS[o.kind];
      expect(Model, `${o.kind} ${o.metadata.name}`).toBeDefined();
      expect(() => new Model(o).validate(), `${o.kind} ${o.metadata.name}`).not.toThrow();
    }
    const names = objects.map((o) => `${o.kind}/${o.metadata.name}`);
    expect(new Set(names).size).toBe(names.length);
    expect(
      deployments()
        .map((d) => d.metadata.name)
        .sort(),
    ).toEqual(["obi-api", "obi-worker-dedicated", "obi-worker-spot"]);
  });

  it("hardens every pod and container: a fixed non-root user, no privilege, read-only root with /tmp on an emptyDir", () => {
    const dockerUid = (file: string) => readFileSync(path.join(repoRoot, file), "utf8").match(/^USER (\d+):\d+$/m)?.[1];
    expect(dockerUid("docker/Dockerfile.api")).toBe("10001");
    expect(dockerUid("docker/Dockerfile.gpu")).toBe("10001");
    for (const d of deployments()) {
      const pod = podOf(d);
      expect(pod.securityContext, d.metadata.name).toMatchObject({
        runAsNonRoot: true,
        runAsUser: 10001,
        runAsGroup: 10001,
        seccompProfile: { type: "RuntimeDefault" },
      });
      const emptyDirs = new Set(pod.volumes.filter((v: any) => v.emptyDir).map((v: any) => v.name));
      for (const c of allContainers(d)) {
        const where = `${d.metadata.name}/${c.name}`;
        expect(c.securityContext, where).toEqual({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ["ALL"] },
        });
        const tmp = c.volumeMounts?.find((m: any) => m.mountPath === "/tmp");
        expect(tmp && emptyDirs.has(tmp.name), `${where} has /tmp on an emptyDir`).toBe(true);
        if (!podOf(d).initContainers.includes(c)) {
          const scratch = c.volumeMounts.find((m: any) => m.mountPath === config().BATCH_DIR);
          expect(scratch && emptyDirs.has(scratch.name), `${where} has BATCH_DIR on an emptyDir`).toBe(true);
        }
      }
    }
  });

  it("never writes the Secret from the base; every process reads it by name, and refuses to start without keys", () => {
    const secrets = byKind("Secret");
    if (name === "example overlay") {
      expect(secrets.map((s) => s.metadata.name)).toEqual(["obi-secrets"]);
      expect(secrets[0].stringData.API_KEYS).not.toBe("");
    } else expect(secrets).toEqual([]);
    for (const d of deployments())
      for (const c of allContainers(d))
        expect(c.envFrom.map((e: any) => e.secretRef?.name ?? e.configMapRef?.name)).toEqual(["obi-config", "obi-secrets"]);
    expect(config().REQUIRE_API_KEYS).toBe("true");
    expect(config().HOST).toBe("0.0.0.0");
    // What a pod whose Secret has no keys would do: stop at start with one line.
    expect(() => loadConfig({ ...config(), DATABASE_URL: "postgres://x@h/db", API_KEYS: "" })).toThrow(ConfigError);
  });

  it("names versioned images from a registry, overridable through kustomize's images", () => {
    for (const d of deployments())
      for (const c of allContainers(d)) {
        expect(c.image, `${d.metadata.name}/${c.name}`).toMatch(/^[a-z0-9.-]+\.[a-z]+\/[a-z0-9./-]+:[\w.-]+$/);
        expect(c.image.endsWith(`:${VERSION}`), c.image).toBe(true);
      }
    const gpu = name === "GPU overlay";
    for (const w of workers()) {
      const main = podOf(w).containers[0];
      expect(main.image.includes("-gpu:"), w.metadata.name).toBe(gpu);
    }
    expect(podOf(deployments().find((d) => d.metadata.name === "obi-api")!).containers[0].image).not.toContain("-gpu");
  });

  it.runIf(name === "GPU overlay")("gives every GPU worker a GPU, the GPU nodes' selector and taint, and GPU=cuda", () => {
    expect(workers()).toHaveLength(2);
    for (const w of workers()) {
      const pod = podOf(w);
      const c = pod.containers[0];
      expect(c.resources.limits["nvidia.com/gpu"], w.metadata.name).toBe("1");
      expect(c.resources.requests["nvidia.com/gpu"], w.metadata.name).toBe("1");
      expect(pod.nodeSelector["nvidia.com/gpu.present"], w.metadata.name).toBe("true");
      expect(pod.tolerations, w.metadata.name).toContainEqual({ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" });
      expect(envOf(c, "GPU")?.value, w.metadata.name).toBe("cuda");
    }
    const spot = workers().find((w) => w.metadata.name === "obi-worker-spot")!;
    expect(podOf(spot).nodeSelector["node.kubernetes.io/lifecycle"]).toBe("spot");
    expect(podOf(spot).tolerations.map((t: any) => t.key)).toEqual(["node.kubernetes.io/lifecycle", "nvidia.com/gpu"]);
  });

  it("leaves the models' memory budget to the service's rule (3/4 of the container's limit), sizes threads to the limit", () => {
    for (const w of workers()) {
      const c = podOf(w).containers[0];
      expect(envOf(c, "MODEL_MEMORY_MB"), w.metadata.name).toBeUndefined();
      expect(envOf(c, "THREADS").valueFrom.resourceFieldRef.resource).toBe("limits.cpu");
      expect(c.resources.limits.memory).toBe(c.resources.requests.memory);
    }
    expect(config().MODEL_MEMORY_MB).toBeUndefined();
  });

  it("migrates in every pod's init container before it serves, the processes themselves never", () => {
    expect(config().MIGRATE).toBe("false");
    for (const d of deployments()) {
      const init = podOf(d).initContainers;
      expect(
        init.map((c: any) => c.name),
        d.metadata.name,
      ).toEqual(d.metadata.name === "obi-api" ? ["migrate"] : ["migrate", "models"]);
      expect(init[0].args).toEqual(["node", "dist/app/main.js", "--migrate"]);
      expect(init[0].image).toBe(podOf(deployments().find((x) => x.metadata.name === "obi-api")!).containers[0].image);
    }
  });

  it("downloads the model into the models volume once, in each worker's init container; the workers only read it", () => {
    expect(config().MODELS_DIR).toBe("/models");
    expect(config().MODEL_PATH).toMatch(/^hf:[\w.-]+\/[\w.-]+-GGUF:Q\w+$/);
    for (const w of workers()) {
      const pod = podOf(w);
      const fetcher = pod.initContainers.find((c: any) => c.name === "models");
      expect(fetcher.args).toEqual(["node", "dist/app/main.js", "--fetch-models"]);
      expect(fetcher.image).toBe(pod.containers[0].image.replace("-gpu:", ":"));
      const mount = (c: any) => c.volumeMounts.find((m: any) => m.mountPath === config().MODELS_DIR);
      expect(mount(fetcher).readOnly ?? false, w.metadata.name).toBe(false);
      expect(mount(pod.containers[0]), w.metadata.name).toMatchObject({ name: mount(fetcher).name, readOnly: true });
      const volume = pod.volumes.find((v: any) => v.name === mount(fetcher).name);
      expect(volume.persistentVolumeClaim, w.metadata.name).toEqual({ claimName: "obi-models" });
    }
  });

  it("drains on SIGTERM within the grace period; the API rolls with no pod down and leaves the endpoints within the drain", () => {
    for (const d of deployments()) {
      const c = podOf(d).containers[0];
      const drain = Number(envOf(c, "SHUTDOWN_DRAIN_SECONDS")?.value ?? config().SHUTDOWN_DRAIN_SECONDS);
      expect(podOf(d).terminationGracePeriodSeconds, d.metadata.name).toBeGreaterThanOrEqual(shutdownBound(drain));
      expect(c.readinessProbe.httpGet.path).toBe("/ready");
      expect(c.livenessProbe.httpGet.path).toBe("/health");
      for (const [k, v] of Object.entries(d.spec.selector.matchLabels)) expect(d.spec.template.metadata.labels[k]).toBe(v);
      expect(envOf(c, "ROLE")?.value).toBe(d.metadata.name === "obi-api" ? "api" : "worker");
    }
    const api = deployments().find((d) => d.metadata.name === "obi-api")!;
    expect(api.spec.strategy.rollingUpdate.maxUnavailable).toBe(0);
    const probe = podOf(api).containers[0].readinessProbe;
    expect(probe.periodSeconds * probe.failureThreshold).toBeLessThan(Number(config().SHUTDOWN_DRAIN_SECONDS));
  });

  it("sets only settings the service declares; the Service, PDBs and HPA name what exists", () => {
    // POD_IP is the manifest's own, expanded into WORKER_URL ($(POD_IP)); the service never reads it.
    const known = new Set([...eachSetting().map((e) => e.setting.env), "MODELS_FILE", "MODEL_CONFIG", "POD_IP"]);
    for (const k of Object.keys(config())) expect(known.has(k), k).toBe(true);
    for (const s of byKind("Secret")) for (const k of Object.keys(s.stringData)) expect(known.has(k), k).toBe(true);
    for (const d of deployments())
      for (const c of allContainers(d)) for (const e of c.env ?? []) expect(known.has(e.name), `${d.metadata.name} ${e.name}`).toBe(true);
    expect(() => checkModelRef("MODEL_PATH", config().MODEL_PATH)).not.toThrow();
    const api = deployments().find((d) => d.metadata.name === "obi-api")!;
    expect(byKind("Service")[0].spec.selector).toEqual(api.spec.selector.matchLabels);
    const hpa = byKind("HorizontalPodAutoscaler")[0];
    expect(deployments().map((d) => d.metadata.name)).toContain(hpa.spec.scaleTargetRef.name);
    expect(hpa.spec.metrics[0].external.metric.name).toBe("obi_queue_depth");
    expect(byKind("PodDisruptionBudget")).toHaveLength(2);
  });
});

describe.skipIf(!KUBECTL)("an operator's own overlay: a new release, the image override docs/deployment.md gives", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), "obi-k8s-"));
    cpSync(path.join(repoRoot, "k8s"), path.join(dir, "k8s"), { recursive: true });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("changes only mutable objects: every image and init container follows the new tag, and no Job is left to collide", async () => {
    const overlay = path.join(dir, "k8s/overlays/release");
    cpSync(path.join(repoRoot, "k8s/overlays/example"), overlay, { recursive: true });
    const k = YAML.parse(readFileSync(path.join(overlay, "kustomization.yaml"), "utf8"));
    k.images = [{ name: "ghcr.io/offline-batch-inference/offline-batch-inference", newTag: "9.9.9" }];
    writeFileSync(path.join(overlay, "kustomization.yaml"), YAML.stringify(k));
    const before = await render(path.join(dir, "k8s/overlays/example"));
    const after = await render(overlay);
    expect(after.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual(before.map((o) => `${o.kind}/${o.metadata.name}`));
    // Kinds whose pod template the API server refuses to change once created.
    expect(after.filter((o) => ["Job", "CronJob"].includes(o.kind))).toEqual([]);
    for (const d of after.filter((o) => o.kind === "Deployment")) for (const c of allContainers(d)) expect(c.image).toMatch(/:9\.9\.9$/);
  });

  /** The docs' overlay file: the YAML block that opens with its path. */
  const documented = () => {
    const page = readFileSync(path.join(repoRoot, "docs/deployment.md"), "utf8");
    const block = /```yaml\n# k8s\/overlays\/mine\/kustomization\.yaml\n([\s\S]*?)```/.exec(page);
    expect(block, "docs/deployment.md shows the overlay that sets the images").not.toBeNull();
    return YAML.parse(block![1]);
  };

  it.each(["../gpu", "../../base"])("the override moves every container's image to the operator's registry over %s", async (over) => {
    const overlay = path.join(dir, "k8s/overlays/mine");
    const k = { ...documented(), resources: [over] };
    cpSync(path.join(repoRoot, "k8s/overlays/example"), overlay, { recursive: true, force: true });
    writeFileSync(path.join(overlay, "kustomization.yaml"), YAML.stringify(k));
    const images = (await render(overlay)).filter((o) => o.kind === "Deployment").flatMap((d) => allContainers(d).map((c) => c.image));
    expect(images.length).toBeGreaterThan(5);
    for (const image of images) expect(image).toMatch(/^registry\.example\.com\/obi\/offline-batch-inference(-gpu)?:0\.1\.0$/);
  });
});
