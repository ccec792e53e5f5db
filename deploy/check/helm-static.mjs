// Static check of the Helm chart where no helm binary is available (Debian 12 and npm ship none):
// Chart.yaml has the required fields, values.yaml parses, and every .Values.<path> that a template
// reads exists in values.yaml (a misspelt value renders as empty in Helm, silently). This is not a
// render: templates are not executed, so make deploy-check says which of the two ran.
//
//   node deploy/check/helm-static.mjs MODULES_DIR CHART_DIR
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [modulesArg, chart] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(modulesArg), "package.json"));
const YAML = require("yaml");
const errors = [];
const meta = YAML.parse(fs.readFileSync(path.join(chart, "Chart.yaml"), "utf8"));
for (const k of ["apiVersion", "name", "version"]) if (!meta[k]) errors.push(`Chart.yaml: ${k} missing`);
if (meta.apiVersion !== "v2") errors.push("Chart.yaml: apiVersion must be v2");
const values = YAML.parse(fs.readFileSync(path.join(chart, "values.yaml"), "utf8"));
let refs = 0;
const tdir = path.join(chart, "templates");
for (const f of fs.readdirSync(tdir)) {
  const text = fs.readFileSync(path.join(tdir, f), "utf8");
  const opens = (text.match(/\{\{/g) || []).length, closes = (text.match(/\}\}/g) || []).length;
  if (opens !== closes) errors.push(`${f}: ${opens} '{{' but ${closes} '}}'`);
  for (const m of text.matchAll(/\.Values((?:\.\w+)+)/g)) {
    refs++;
    let v = values;
    for (const key of m[1].slice(1).split(".")) {
      if (v === null || typeof v !== "object" || !(key in v)) { errors.push(`${f}: .Values${m[1]} is not in values.yaml`); break; }
      v = v[key];
    }
  }
}
for (const e of errors) console.error(`FAIL ${e}`);
console.log(`helm-static: ${refs} .Values references in ${fs.readdirSync(tdir).length} templates, ${errors.length} problems`);
process.exit(errors.length ? 1 : 0);
