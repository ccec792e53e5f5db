// Checks that a rendered tide Deployment's settings agree with each other (make deploy-check):
//  - CPU request = limit = instance_group count x intra_op_threads of the model config it mounts
//    (Guaranteed QoS, one inference thread per CPU; intra_op_threads 0 would mean "every core of
//    the node" and is refused);
//  - terminationGracePeriodSeconds > preStop sleep + TIDE_SHUTDOWN_GRACE_MS (the kubelet must not
//    SIGKILL a drain);
//  - startupProbe and readinessProbe on /v2/health/ready, livenessProbe on /v2/health/live; or
//    gRPC health checks of the service names tide maps to them ("readiness", "liveness") on the
//    container port --grpc-port serves.
//
//   node deploy/check/consistency.mjs MODULES_DIR FILE.yaml...
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [modulesArg, ...files] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(modulesArg), "package.json"));
const YAML = require("yaml");
const cpus = (q) => (String(q).endsWith("m") ? parseInt(q, 10) / 1000 : Number(q));
let checked = 0, failed = 0;
for (const file of files) {
  const objs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => d.toJS()).filter(Boolean);
  const configMaps = new Map(objs.filter((o) => o.kind === "ConfigMap").map((o) => [o.metadata.name, o]));
  for (const d of objs.filter((o) => o.kind === "Deployment")) {
    const errors = [];
    const pod = d.spec.template.spec;
    const c = pod.containers.find((x) => x.name === "tide");
    if (!c) continue;
    checked++;
    const env = Object.fromEntries((c.env || []).map((e) => [e.name, e.value]));
    const vol = (pod.volumes || []).find((v) => v.name === "model-config");
    const cm = vol && configMaps.get(vol.configMap.name);
    if (!cm) errors.push("no model-config ConfigMap in the same render");
    else {
      const text = cm.data["config.pbtxt"];
      const count = Number((text.match(/count:\s*(\d+)/) || [])[1]);
      const intra = Number((text.match(/"intra_op_threads"\s*value\s*\{\s*string_value:\s*"(\d+)"/) || [])[1]);
      if (!(intra >= 1)) errors.push("intra_op_threads must be set >= 1 in config.pbtxt");
      const req = cpus(c.resources?.requests?.cpu), lim = cpus(c.resources?.limits?.cpu);
      if (req !== lim) errors.push(`cpu request ${req} != limit ${lim}`);
      if (count * intra !== lim) errors.push(`instances ${count} x intra_op_threads ${intra} = ${count * intra} != cpu limit ${lim}`);
      else console.log(`ok   ${file}: ${d.metadata.name}: ${count} instances x ${intra} threads = ${lim} CPUs, io-threads ${env.TIDE_IO_THREADS}`);
    }
    const grace = Number(env.TIDE_SHUTDOWN_GRACE_MS ?? 10000) / 1000;
    const preStop = Number((c.lifecycle?.preStop?.exec?.command || []).slice(-1)[0] || 0);
    const tgps = pod.terminationGracePeriodSeconds ?? 30;
    if (!(tgps > grace + preStop)) errors.push(`terminationGracePeriodSeconds ${tgps} <= preStop ${preStop} + shutdown grace ${grace}`);
    else console.log(`ok   ${file}: ${d.metadata.name}: terminationGracePeriodSeconds ${tgps} > preStop ${preStop} s + grace ${grace} s`);
    // Probes: HTTP GET of the path, or a gRPC health check of the service name tide maps to it,
    // on the port tide's --grpc-port serves (a container port of that number).
    const grpcArg = (c.args || []).map((a) => String(a).match(/^--grpc-port=(\d+)$/)).find(Boolean);
    const grpcPort = grpcArg ? Number(grpcArg[1]) : Number(env.TIDE_GRPC_PORT ?? 8001);
    const grpcServed = grpcPort > 0 && (c.ports || []).some((p) => p.containerPort === grpcPort);
    for (const [probe, path, service] of [["startupProbe", "/v2/health/ready", "readiness"], ["readinessProbe", "/v2/health/ready", "readiness"],
                                          ["livenessProbe", "/v2/health/live", "liveness"]]) {
      const p = c[probe];
      if (p?.grpc) {
        if (p.grpc.service !== service) errors.push(`${probe} must check gRPC service "${service}" (tide's ${path})`);
        else if (!grpcServed || p.grpc.port !== grpcPort) errors.push(`${probe}: gRPC port ${p.grpc.port} is not the --grpc-port container port (${grpcPort})`);
        else console.log(`ok   ${file}: ${d.metadata.name}: ${probe} gRPC ${grpcPort} service ${service}`);
      } else if (p?.httpGet?.path !== path) errors.push(`${probe} must GET ${path} or check gRPC service "${service}"`);
    }
    if (errors.length) { failed++; console.error(`FAIL ${file}: ${d.metadata.name}\n  ${errors.join("\n  ")}`); }
  }
}
console.log(`consistency: ${checked} tide Deployments, ${failed} failed`);
process.exit(failed || !checked ? 1 : 0);
