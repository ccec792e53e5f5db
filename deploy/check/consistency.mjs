// Checks that a rendered tide Deployment's settings agree with each other (make deploy-check):
//  - CPU request = limit = instance_group count x intra_op_threads of the model config it mounts
//    (Guaranteed QoS, one inference thread per CPU; intra_op_threads 0 would mean "every core of
//    the node" and is refused);
//  - terminationGracePeriodSeconds > preStop sleep + TIDE_SHUTDOWN_GRACE_MS (the kubelet must not
//    SIGKILL a drain);
//  - startupProbe and readinessProbe on /v2/health/ready, livenessProbe on /v2/health/live; or
//    gRPC health checks of the service names tide maps to them ("readiness", "liveness") on the
//    container port --grpc-port serves;
//  - credentials (Deployments and KServe ServingRuntimes): no key in args (--api-key,
//    --admin-api-key: /proc/<pid>/cmdline) or env (TIDE_API_KEY, TIDE_ADMIN_API_KEY); each key file
//    (--api-key-file, --admin-api-key-file, --api-keys, or their TIDE_* twins) lies in a read-only
//    mount of a Secret volume that holds that file, with a mode that has no write bits and lets tide
//    read it (group read with the pod's fsGroup, else read for all: Secret files are root's); the
//    admin key's Secret is not an inference key's.
//
//   node deploy/check/consistency.mjs MODULES_DIR FILE.yaml...
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [modulesArg, ...files] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(modulesArg), "package.json"));
const YAML = require("yaml");
const cpus = (q) => (String(q).endsWith("m") ? parseInt(q, 10) / 1000 : Number(q));

// Credential checks for one tide container of a pod spec (volumes from the same spec). Returns
// errors; logs what it verified.
const KEY_FLAGS = { "--api-key-file": "TIDE_API_KEY_FILE", "--admin-api-key-file": "TIDE_ADMIN_API_KEY_FILE",
                    "--api-keys": "TIDE_API_KEYS" };
function checkCredentials(c, volumes, fsGroup, where) {
  const errors = [], secrets = {};
  for (const a of (c.args || []).map(String)) {
    if (/^--(admin-)?api-key(=|$)/.test(a)) errors.push(`${a.split("=")[0]} in args: the key shows in /proc/<pid>/cmdline; use ${a.split("=")[0]}-file`);
  }
  for (const e of c.env || []) {
    if (e.name === "TIDE_API_KEY" || e.name === "TIDE_ADMIN_API_KEY") errors.push(`env ${e.name}: the key shows in /proc/<pid>/environ and the pod spec; use ${e.name}_FILE`);
  }
  for (const [flag, envName] of Object.entries(KEY_FLAGS)) {
    const arg = (c.args || []).map(String).find((a) => a.startsWith(flag + "="));
    const env = (c.env || []).find((e) => e.name === envName);
    const file = arg ? arg.slice(flag.length + 1) : env?.value;
    if (env?.valueFrom) errors.push(`env ${envName} takes a path, not a value from ${Object.keys(env.valueFrom)[0]}`);
    if (!file) continue;
    const m = (c.volumeMounts || []).find((vm) => file.startsWith(vm.mountPath.replace(/\/?$/, "/")));
    const vol = m && (volumes || []).find((v) => v.name === m.name);
    if (!vol?.secret) { errors.push(`${flag} ${file}: not in a mounted Secret volume`); continue; }
    if (m.readOnly !== true) errors.push(`${flag} ${file}: mount ${m.mountPath} is not readOnly`);
    if (m.subPath) errors.push(`${flag} ${file}: a subPath mount is never refreshed when the Secret changes`);
    const rel = file.slice(m.mountPath.replace(/\/?$/, "/").length);
    const item = (vol.secret.items || []).find((i) => i.path === rel);
    if (vol.secret.items && !item) errors.push(`${flag} ${file}: Secret volume ${vol.name} has no item with path ${rel}`);
    const mode = item?.mode ?? vol.secret.defaultMode ?? 0o644;
    if (mode & 0o222) errors.push(`${flag} ${file}: mode ${mode.toString(8)} has write bits`);
    const readBit = fsGroup !== undefined ? 0o040 : 0o004;
    if (!(mode & readBit)) errors.push(`${flag} ${file}: mode ${mode.toString(8)} is unreadable for tide (${fsGroup !== undefined ? `group fsGroup ${fsGroup}` : "no fsGroup: others"})`);
    if (fsGroup !== undefined && (mode & 0o007)) errors.push(`${flag} ${file}: mode ${mode.toString(8)} lets every user of the container read it; 0440 with fsGroup ${fsGroup} suffices`);
    secrets[flag] = vol.secret.secretName;
    if (!errors.length) console.log(`ok   ${where}: ${flag} ${file} from Secret ${vol.secret.secretName}, read-only, mode ${mode.toString(8)}`);
  }
  const admin = secrets["--admin-api-key-file"];
  for (const flag of ["--api-key-file", "--api-keys"]) {
    if (admin && secrets[flag] === admin) errors.push(`the admin key's Secret ${admin} is also the Secret of ${flag}: give the admin key a Secret of its own`);
  }
  return errors;
}

let checked = 0, failed = 0, runtimes = 0;
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
    errors.push(...checkCredentials(c, pod.volumes, pod.securityContext?.fsGroup, `${file}: ${d.metadata.name}`));
    if (errors.length) { failed++; console.error(`FAIL ${file}: ${d.metadata.name}\n  ${errors.join("\n  ")}`); }
  }
  // KServe ServingRuntime: no pod securityContext (Knative refuses fsGroup by default).
  for (const r of objs.filter((o) => o.kind === "ServingRuntime")) {
    runtimes++;
    const errors = [];
    for (const c of r.spec.containers || []) errors.push(...checkCredentials(c, r.spec.volumes, undefined, `${file}: ${r.metadata.name}/${c.name}`));
    if (errors.length) { failed++; console.error(`FAIL ${file}: ${r.metadata.name}\n  ${errors.join("\n  ")}`); }
  }
}
console.log(`consistency: ${checked} tide Deployments, ${runtimes} ServingRuntimes, ${failed} failed`);
process.exit(failed || !checked ? 1 : 0);
