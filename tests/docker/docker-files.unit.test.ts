// Docker cannot run here, so the Docker files are checked as far as reading them allows: the compose
// files parse and point at files that exist, every COPY source is in the build context, the image
// runs the compiled entry point as a non-root user with a health check, Prometheus scrapes /metrics.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import YAML from "yaml";
import { FLOORS } from "../../testkit/floors.js";
import { repoRoot } from "../../testkit/repo-root.js";

const read = (p: string) => readFileSync(path.join(repoRoot, p), "utf8");
const yaml = (p: string) => YAML.parse(read(p));

interface Instruction {
  op: string;
  args: string;
  stage: number;
}

/** Dockerfile instructions with line continuations joined and comments dropped. */
function instructions(file: string): Instruction[] {
  const joined = read(file).replace(/\\\n/g, " ");
  let stage = -1;
  const out: Instruction[] = [];
  for (const line of joined.split("\n")) {
    const m = /^\s*([A-Z]+)\s+(.*)$/.exec(line);
    if (!m || line.trim().startsWith("#")) continue;
    if (m[1] === "FROM") stage++;
    out.push({ op: m[1], args: m[2].trim(), stage });
  }
  return out;
}

const ignored = read(".dockerignore")
  .split("\n")
  .map((l) => l.trim())
  .filter(Boolean);

describe.each(["docker/Dockerfile.api", "docker/Dockerfile.gpu"])("%s", (file) => {
  const ins = instructions(file);
  const last = Math.max(...ins.map((i) => i.stage));
  const final = ins.filter((i) => i.stage === last);

  it("copies only files that exist in the build context", () => {
    for (const copy of ins.filter((i) => i.op === "COPY" && !i.args.startsWith("--from"))) {
      const sources = copy.args.split(/\s+/).slice(0, -1);
      for (const src of sources) {
        expect(existsSync(path.join(repoRoot, src)), `${file}: COPY ${src}`).toBe(true);
        expect(ignored, `${src} is in .dockerignore`).not.toContain(src);
      }
    }
  });

  it("builds the compiled service and runs it as a non-root user with a health check", () => {
    expect(ins.some((i) => i.op === "RUN" && /npm ci\b/.test(i.args) && !/omit=optional/.test(i.args))).toBe(true);
    expect(ins.some((i) => i.op === "RUN" && /npm run build\b/.test(i.args))).toBe(true);
    expect(JSON.parse(read("package.json")).scripts.build).toMatch(/tsc -p tsconfig\.build\.json/);
    const cmd = JSON.parse(final.find((i) => i.op === "CMD")!.args);
    expect(cmd).toEqual(["node", "--expose-gc", "dist/app/main.js"]);
    const user = final.find((i) => i.op === "USER")?.args;
    expect(user).toBeDefined();
    expect(user).not.toMatch(/^(root|0)$/);
    expect(final.find((i) => i.op === "HEALTHCHECK")?.args).toMatch(/\/health/);
    expect(final.find((i) => i.op === "EXPOSE")?.args).toBe("8000");
    expect(final.some((i) => i.op === "RUN" && /npm ci/.test(i.args))).toBe(false);
  });
});

/** Top-level folders of every source file the entry points import, followed through relative imports. */
function sourceFolders(entries: string[]): Set<string> {
  const seen = new Set<string>();
  const todo = [...entries];
  while (todo.length > 0) {
    const file = todo.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const m of read(file).matchAll(/(?:from|import)\s+["'](\.[^"']+)\.js["']/g)) {
      todo.push(path.relative(repoRoot, path.resolve(repoRoot, path.dirname(file), `${m[1]}.ts`)));
    }
  }
  return new Set([...seen].map((f) => f.split(path.sep)[0]));
}

describe("the build the images run", () => {
  it("compiles and copies every folder the service and the runner import", () => {
    const folders = sourceFolders(["app/main.ts", "runner/main.ts"]);
    expect(folders).toContain("openai");
    const build = JSON.parse(read("tsconfig.build.json").replace(/^\s*\/\/.*$/gm, ""));
    // The images copy the tree (what .dockerignore leaves) and compile what tsconfig.build.json names.
    const ignored = read(".dockerignore").split("\n").filter(Boolean);
    for (const file of ["docker/Dockerfile.api", "docker/Dockerfile.gpu"]) {
      const copied = instructions(file).filter((i) => i.op === "COPY" && !i.args.startsWith("--from"));
      expect(copied.map((i) => i.args)).toContain(". .");
    }
    for (const f of folders) {
      expect(build.include, `tsconfig.build.json includes ${f}`).toContain(f);
      expect(ignored, `.dockerignore keeps ${f}`).not.toContain(f);
    }
    // The product is one list: the floors from runner/ down, without the test kit (testkit/floors.ts's plan).
    const product = FLOORS.slice(FLOORS.findIndex((floor) => floor.includes("runner")))
      .flat()
      .filter((f) => f !== "testkit");
    expect([...build.include].sort()).toEqual(product.sort());
  });

  it("compiles app/main.ts to dist/app/main.js and ships the files the code reads beside itself", () => {
    const build = JSON.parse(read("tsconfig.build.json").replace(/^\s*\/\/.*$/gm, ""));
    expect(build.compilerOptions).toMatchObject({ outDir: "dist", rootDir: ".", noEmit: false });
    expect(build.include).toEqual(expect.arrayContaining(["api", "engine", "pipeline", "runner"]));
    const assets = /ASSETS = (\[.*\])/.exec(read("scripts/copy-build-assets.mjs"))![1];
    for (const asset of JSON.parse(assets)) expect(existsSync(path.join(repoRoot, asset)), asset).toBe(true);
  });
});

describe("compose", () => {
  const compose = yaml("docker/docker-compose.yml");
  const dir = path.join(repoRoot, "docker");

  it("runs from the repository root through an include of docker/docker-compose.yml", () => {
    expect(yaml("docker-compose.yml").include).toEqual(["docker/docker-compose.yml"]);
  });

  it("builds the API from the repository root with a models volume, MODEL_PATH and a data volume", () => {
    const api = compose.services.api;
    expect(path.resolve(dir, api.build.context)).toBe(repoRoot);
    expect(existsSync(path.join(repoRoot, api.build.dockerfile))).toBe(true);
    expect(api.ports).toEqual(["${PORT:-8000}:8000"]);
    expect(api.environment.MODEL_PATH).toMatch(/\/models\//);
    expect(api.volumes).toEqual(expect.arrayContaining([expect.stringMatching(/:\/models:ro$/), "batch-data:/data"]));
    expect(Object.keys(compose.volumes)).toContain("batch-data");
  });

  it("has Prometheus behind a profile, scraping the API's /metrics", () => {
    const prom = compose.services.prometheus;
    expect(prom.profiles).toEqual(["monitoring"]);
    const mount = prom.volumes[0].split(":")[0];
    const config = YAML.parse(readFileSync(path.resolve(dir, mount), "utf8"));
    const job = config.scrape_configs[0];
    expect(job.metrics_path).toBe("/metrics");
    expect(job.static_configs[0].targets).toEqual(["api:8000"]);
  });

  it("has a llama-server upstream behind a profile, health-checked before the API starts, and its models file", async () => {
    const server = compose.services["llama-server"];
    expect(server.profiles).toEqual(["upstream"]);
    expect(server.healthcheck.test.join(" ")).toMatch(/\/health/);
    expect(compose.services.api.depends_on["llama-server"]).toEqual({ condition: "service_healthy", required: false });
    expect(compose.services.api.environment.MODELS_FILE).toBe("${MODELS_FILE:-}");
    const mount = compose.services.api.volumes.find((v: string) => v.includes("models.upstream.yaml"));
    const [host, inContainer] = mount.split(":");
    expect(inContainer).toBe("/config/models.upstream.yaml");
    const { parseModelsFile } = await import("../../backends/registry.js");
    const registry = parseModelsFile(readFileSync(path.resolve(dir, host), "utf8"), host, {});
    const remote = registry.resolve("anything")!;
    expect(remote.backend).toMatchObject({ kind: "upstream", baseUrls: ["http://llama-server:8080/v1"] });
    expect(registry.resolve("Qwen/Qwen2.5-0.5B-Instruct")?.name).toBe("remote");
  });

  it("gives the service more time to stop than its own shutdown bound (35 s)", () => {
    expect(Number.parseInt(yaml("docker/docker-compose.yml").services.api.stop_grace_period, 10)).toBeGreaterThan(35);
  });

  it("has a GPU override that builds the CUDA image and reserves the GPUs", () => {
    const gpu = yaml("docker/docker-compose.gpu.yml").services.api;
    expect(existsSync(path.join(repoRoot, gpu.build.dockerfile))).toBe(true);
    expect(gpu.deploy.resources.reservations.devices[0].capabilities).toEqual(["gpu"]);
  });
});

describe("compose for many machines (docker/docker-compose.distributed.yml)", () => {
  const file = "docker/docker-compose.distributed.yml";
  const compose = YAML.parse(read(file), { merge: true });
  const s = compose.services;
  const nodes = ["api", "worker-spot", "worker-dedicated"];
  /** Compose's `${VAR:-default}`, `${VAR:+alt}` and `${VAR:?error}` with only MODEL_FILE set. */
  const defaults = (env: Record<string, unknown>) =>
    Object.fromEntries(
      Object.entries(env).map(([k, v]) => [
        k,
        String(v)
          .replace(/\$\{MODEL_FILE:\?[^}]*\}/g, "model.gguf")
          .replace(/\$\{[A-Z_]+:-([^}]*)\}/g, "$1")
          .replace(/\$\{[A-Z_]+:\+[^}]*\}\}?/g, ""),
      ]),
    );

  it("has PostgreSQL and an S3 server (not MinIO) health-checked, a migration once, then API servers and workers", () => {
    expect(s.postgres.image).toMatch(/^postgres:1[5-9]/);
    expect(s.postgres.healthcheck.test.join(" ")).toMatch(/pg_isready/);
    expect(s.s3.image).toMatch(/seaweedfs/);
    expect(JSON.stringify(compose)).not.toMatch(/minio/i);
    expect(s.migrate.command).toEqual(["node", "dist/app/main.js", "--migrate"]);
    expect(s.migrate.depends_on).toEqual({ postgres: { condition: "service_healthy" } });
    for (const name of nodes) {
      expect(s[name].depends_on, name).toEqual({
        migrate: { condition: "service_completed_successfully" },
        s3: { condition: "service_healthy" },
      });
      expect(path.resolve(path.join(repoRoot, "docker"), s[name].build.context)).toBe(repoRoot);
      // The processes only check the schema; longer to stop than the process's own bound (35 s).
      expect(s[name].environment.MIGRATE).toBe("false");
      expect(Number.parseInt(s[name].stop_grace_period, 10)).toBeGreaterThan(35);
    }
    expect(s.api.environment.ROLE).toBe("api");
    expect(String(s.api.deploy.replicas)).toMatch(/2/);
    expect([s["worker-spot"], s["worker-dedicated"]].map((w) => [w.environment.ROLE, w.environment.WORKER_POOL])).toEqual([
      ["worker", "spot"],
      ["worker", "dedicated"],
    ]);
  });

  it("sizes each worker to its own limits and makes every worker run the one GGUF named", () => {
    for (const name of ["worker-spot", "worker-dedicated"]) {
      const w = s[name];
      expect(w.deploy.resources.limits.cpus).toBe("${WORKER_CPUS:-2}");
      expect(w.environment.THREADS).toBe("${WORKER_CPUS:-2}");
      expect(w.deploy.resources.limits.memory).toMatch(/WORKER_MEMORY/);
      expect(w.environment.MODEL_MEMORY_MB).toBeTruthy();
      // Unset, compose refuses to start rather than give each worker its own random-weights model.
      expect(w.environment.MODEL_PATH).toMatch(/^\/models\/\$\{MODEL_FILE:\?/);
    }
  });

  it("gives every node settings the service accepts, pointing at the compose services", async () => {
    const { loadConfig } = await import("../../config/config.js");
    for (const name of [...nodes, "migrate"]) {
      const config = loadConfig(defaults(s[name].environment));
      expect(new URL(config.cluster.databaseUrl).host).toBe("postgres:5432");
      expect(new URL(config.s3.endpoint).hostname).toBe("s3");
    }
    // The credentials are the identity the S3 server is configured with.
    const identity = JSON.parse(read("docker/seaweedfs-s3.json")).identities[0].credentials[0];
    expect(s.api.environment.S3_ACCESS_KEY_ID).toBe(identity.accessKey);
    expect(s.api.environment.S3_SECRET_ACCESS_KEY).toBe(identity.secretKey);
    expect(s.s3.volumes).toContain("./seaweedfs-s3.json:/etc/seaweedfs/s3.json:ro");
  });

  it("puts the proxy in front of the API servers, finding them by name at request time", () => {
    expect(s.proxy.depends_on).toEqual({ api: { condition: "service_healthy" } });
    // Healthy means ready here: /health answers while a server still starts (503 `starting` elsewhere).
    expect(s.api.healthcheck.test.join(" ")).toMatch(/127\.0\.0\.1:8000\/ready'\)/);
    expect(s.api.healthcheck.test.join(" ")).not.toMatch(/\/health/);
    const conf = read("docker/nginx.distributed.conf");
    expect(conf).toMatch(/resolver 127\.0\.0\.11 valid=\d+s/);
    expect(conf).toMatch(/set \$api http:\/\/api:8000;/);
    expect(conf).toMatch(/proxy_pass \$api;/);
    expect(conf).not.toMatch(/^upstream /m);
    expect(s.proxy.volumes[0]).toBe("./nginx.distributed.conf:/etc/nginx/conf.d/default.conf:ro");
  });

  it("scrapes every process and provisions a Grafana dashboard whose queries name metrics the service exports", async () => {
    const prom = YAML.parse(read("docker/prometheus.distributed.yml"));
    expect(prom.scrape_configs[0].dns_sd_configs[0].names).toEqual(nodes);
    expect(s.prometheus.volumes[0]).toBe("./prometheus.distributed.yml:/etc/prometheus/prometheus.yml:ro");
    expect(s.grafana.volumes).toEqual([
      "./grafana/provisioning:/etc/grafana/provisioning:ro",
      "./grafana/dashboards:/var/lib/grafana/dashboards:ro",
    ]);
    const source = YAML.parse(read("docker/grafana/provisioning/datasources/prometheus.yml")).datasources[0];
    expect(source.url).toBe("http://prometheus:9090");
    const provider = YAML.parse(read("docker/grafana/provisioning/dashboards/obi.yml")).providers[0];
    expect(provider.options.path).toBe("/var/lib/grafana/dashboards");
    const dashboard = JSON.parse(read("docker/grafana/dashboards/obi.json"));
    const { createMetrics } = await import("../../metrics/metrics.js");
    const exported = new Set(
      createMetrics({ defaultMetrics: false })
        .registry.getMetricsAsArray()
        .map((m) => m.name),
    );
    expect(dashboard.panels.length).toBeGreaterThanOrEqual(8);
    for (const panel of dashboard.panels) {
      expect(panel.datasource.uid).toBe(source.uid);
      for (const name of panel.targets[0].expr.match(/obi_[a-z_]+/g)) expect(exported.has(name), `${panel.title}: ${name}`).toBe(true);
    }
  });
});
