// Validates rendered Kubernetes objects (make deploy-check):
//  1. schema: each object of a built-in kind through kubernetes-models' validator (the Kubernetes
//     OpenAPI schema: types, required fields, formats);
//  2. unknown fields: every key of every object is looked up in the model's TypeScript interface
//     (kubernetes-models' .d.ts files, which list each type's fields), recursively; a misspelt or
//     misplaced field (which the API server would drop or reject) fails the check. Maps
//     (labels, annotations, resources.limits, ConfigMap data) are not field-checked.
//  3. KServe objects (ServingRuntime, InferenceService) have no published models package: their
//     fields are checked against the small allow-list below (the subset these manifests use),
//     and their embedded containers and volumes against the core Container and Volume types.
//
//   node deploy/check/validate.mjs MODULES_DIR FILE.yaml...
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const [modulesArg, ...files] = process.argv.slice(2);
const modulesDir = path.resolve(modulesArg);
const require = createRequire(path.join(modulesDir, "package.json"));
const YAML = require("yaml");
const km = path.join(modulesDir, "node_modules", "kubernetes-models");
const apimachinery = path.join(modulesDir, "node_modules", "@kubernetes-models", "apimachinery");

// --- interface table from the .d.ts files ---------------------------------------------------------
const types = new Map();  // long name -> Map(field -> type text)
function walk(dir, out) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) { if (e.name !== "_schemas" && e.name !== "node_modules") walk(p, out); }
    else if (e.name.endsWith(".d.ts")) out.push(p);
  }
  return out;
}
for (const file of [...walk(km, []), ...walk(apimachinery, [])]) {
  const text = fs.readFileSync(file, "utf8");
  const alias = new Map();
  for (const m of text.matchAll(/export type \{ (I\w+) as (I\w+)/g)) alias.set(m[1], m[2]);
  for (const m of text.matchAll(/export interface (I\w+)(?: extends [\w, ]+)? \{\n([\s\S]*?)\n\}/g)) {
    const fields = new Map();
    // top-level members are the lines indented 4 spaces: "name"?: Type;  (a map's type spans
    // lines and starts with "{": it is not descended into)
    for (const line of m[2].split("\n")) {
      const f = line.match(/^ {4}"([^"]+)"\??: (.*?);?$/);
      if (f) fields.set(f[1], f[2].trim());
    }
    types.set(alias.get(m[1]) ?? m[1], fields);
  }
}

function elementType(t) {
  let m = t.match(/^Array<(I\w+)>$/);
  if (m) return m[1];
  m = t.match(/^(I\w+)$/);
  return m ? m[1] : null;  // primitives, unions, maps: not descended into
}

function checkFields(obj, typeName, where, errors) {
  const fields = types.get(typeName);
  if (!fields || fields.size === 0 || obj === null || typeof obj !== "object" || Array.isArray(obj)) return;
  for (const [k, v] of Object.entries(obj)) {
    if (!fields.has(k)) { errors.push(`${where}.${k}: unknown field (type ${typeName.replace(/^IIoK8s/, "")})`); continue; }
    const sub = elementType(fields.get(k));
    if (!sub) continue;
    if (Array.isArray(v)) v.forEach((x, i) => checkFields(x, sub, `${where}.${k}[${i}]`, errors));
    else checkFields(v, sub, `${where}.${k}`, errors);
  }
}

// --- KServe allow-list (serving.kserve.io; the fields these manifests use, from KServe's CRDs) -----
const CONTAINER = "IIoK8sApiCoreV1Container", VOLUME = "IIoK8sApiCoreV1Volume";
const kserve = {
  "ServingRuntime": { spec: { supportedModelFormats: [{ name: 1, version: 1, autoSelect: 1, priority: 1 }],
                              protocolVersions: 1, multiModel: 1, disabled: 1, annotations: 1, labels: 1,
                              containers: CONTAINER, volumes: VOLUME, nodeSelector: 1, tolerations: 1, affinity: 1,
                              grpcEndpoint: 1, grpcDataEndpoint: 1, httpDataEndpoint: 1, replicas: 1,
                              storageHelper: 1, builtInAdapter: 1, imagePullSecrets: 1 } },
  "InferenceService": { spec: { predictor: { minReplicas: 1, maxReplicas: 1, scaleMetric: 1, scaleTarget: 1,
                                             canaryTrafficPercent: 1, containerConcurrency: 1, timeout: 1,
                                             serviceAccountName: 1, annotations: 1, labels: 1,
                                             model: { modelFormat: { name: 1, version: 1 }, runtime: 1,
                                                      protocolVersion: 1, storageUri: 1, args: 1, env: 1,
                                                      resources: 1, image: 1, ports: 1 } } } },
};
function checkAllowed(obj, allowed, where, errors) {
  if (allowed === 1) return;
  if (typeof allowed === "string") {  // a list of a core type (containers, volumes)
    if (!types.has(allowed)) { errors.push(`${where}: type ${allowed} not found in kubernetes-models`); return; }
    (obj || []).forEach((c, i) => checkFields(c, allowed, `${where}[${i}]`, errors));
    return;
  }
  if (Array.isArray(allowed)) { (obj || []).forEach((x, i) => checkAllowed(x, allowed[0], `${where}[${i}]`, errors)); return; }
  for (const [k, v] of Object.entries(obj || {})) {
    if (!(k in allowed)) errors.push(`${where}.${k}: unknown field`);
    else checkAllowed(v, allowed[k], `${where}.${k}`, errors);
  }
}

// --- main ------------------------------------------------------------------------------------------
const groupDir = (apiVersion) => {
  const [g, v] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  return g === "" ? v : `${g}/${v}`;
};
let objects = 0, failed = 0;
for (const file of files) {
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"));
  for (const doc of docs) {
    if (doc.errors.length) { console.error(`${file}: YAML: ${doc.errors[0].message}`); failed++; continue; }
    const obj = doc.toJS();
    if (!obj) continue;
    objects++;
    const name = `${file}: ${obj.kind}/${obj.metadata?.name}`;
    const errors = [];
    if (obj.apiVersion?.startsWith("serving.kserve.io/")) {
      const allowed = kserve[obj.kind];
      if (!allowed) errors.push(`no allow-list for ${obj.kind}`);
      else {
        checkFields(obj.metadata, "IIoK8sApimachineryPkgApisMetaV1ObjectMeta", "metadata", errors);
        checkAllowed(obj.spec, allowed.spec, "spec", errors);
        for (const k of Object.keys(obj)) if (!["apiVersion", "kind", "metadata", "spec"].includes(k)) errors.push(`${k}: unknown field`);
      }
    } else {
      const modFile = path.join(km, groupDir(obj.apiVersion), `${obj.kind}.js`);
      if (!fs.existsSync(modFile)) errors.push(`unknown kind ${obj.apiVersion} ${obj.kind}`);
      else {
        const mod = await import(pathToFileURL(modFile).href);
        try { new mod[obj.kind](obj).validate(); } catch (e) { errors.push(`schema: ${e.message}`); }
        const dts = fs.readFileSync(modFile.replace(/\.js$/, ".d.ts"), "utf8");
        const long = dts.match(new RegExp(`export type \\{ I${obj.kind} as (I\\w+)`))[1];
        checkFields(obj, long, obj.kind, errors);
      }
    }
    if (errors.length) { failed++; console.error(`FAIL ${name}\n  ${errors.join("\n  ")}`); }
    else console.log(`ok   ${name}`);
  }
}
console.log(`validate: ${objects} objects, ${failed} failed (${types.size} Kubernetes types known)`);
process.exit(failed ? 1 : 0);
