#!/usr/bin/env bash
# make deploy-check: renders every deployment manifest and checks it, without a cluster (none can
# run here; nothing is applied anywhere):
#   1. kubectl kustomize deploy/k8s/base and each overlay;
#   2. the Helm chart: helm lint + helm template when a helm binary exists; otherwise (Debian 12
#      and npm ship none) build/tools/helm-render (deploy/check/helm-render: Helm's template engine,
#      Go text/template + Sprig v3, built from Debian's Go packages) lints it (strict render, every
#      document named) and renders it, with a self-test that a misspelt value fails the lint; then a
#      static check of Chart.yaml, values.yaml and every .Values reference;
#   3. every rendered object and the KServe manifests: Kubernetes schema + unknown-field check
#      (deploy/check/validate.mjs), then a self-test that a misspelt field does fail it;
#   4. settings that must agree (deploy/check/consistency.mjs): CPUs = instances x threads,
#      termination grace > preStop + drain grace, probe paths or gRPC health services and port;
#      keys only as files from read-only Secret volumes, the admin key's Secret apart;
#   5. `podman kube play` of the dev overlay's Deployment (init container copying the model image,
#      ConfigMap, probes, key files), on a loopback host port: it must become ready, refuse a rerank
#      call without the inference key and answer it with the key, and let only the admin key reach
#      the repository API.
#      Needs localhost/tide:latest and localhost/tide-models:latest (built here if absent from
#      build/tide and $MODEL_REPOSITORY). SKIP_PLAY=1 skips this step.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build/deploy-check
mkdir -p "$out/rendered"
scripts/deploy/install-tools.sh k8s

# npm packages for the checks, pinned, under build/ (git-ignored).
if [ ! -f "$out/node_modules/.tide-deploy-check-1" ]; then
  (cd "$out" && { [ -f package.json ] || echo '{"name":"tide-deploy-check","private":true}' > package.json; } \
     && npm install --silent --no-audit --no-fund kubernetes-models@5.1.0 yaml@2.8.1 && touch node_modules/.tide-deploy-check-1)
fi

# The dev overlay's keys (random, git-ignored; kept when present): its secretGenerator reads them.
deploy/k8s/overlays/dev/make-keys.sh

echo "== 1. kustomize ($(kubectl version --client 2>/dev/null | grep -i kustomize))"
rm -f "$out"/rendered/*.yaml
for dir in deploy/k8s/base deploy/k8s/overlays/*/; do
  name=$(basename "$dir")
  # (stderr kept aside: newer kubectl warns that the kubectl-1.20-compatible fields are deprecated)
  kubectl kustomize "$dir" > "$out/rendered/kustomize-$name.yaml" 2> "$out/kustomize-$name.log" \
    || { cat "$out/kustomize-$name.log" >&2; exit 1; }
  echo "rendered $dir: $(grep -c '^kind:' "$out/rendered/kustomize-$name.yaml") objects"
done

echo "== 2. helm chart deploy/helm/tide"
# Credentials: an existing inference Secret, an admin Secret the chart creates, a tenants file.
HELM_CREDENTIALS=auth.apiKey.existingSecret=tide-api-key,auth.adminApiKey.value=example-admin-key,auth.apiKeys.existingSecret=tide-tenant-keys,auth.metricsRequireKey=true
HELM_SHARED_ADMIN=auth.apiKey.existingSecret=tide-keys,auth.adminApiKey.existingSecret=tide-keys
if command -v helm >/dev/null 2>&1; then
  helm lint deploy/helm/tide
  helm template tide deploy/helm/tide > "$out/rendered/helm-default.yaml"
  helm template tide deploy/helm/tide --set autoscaling.enabled=false,model.existingClaim=models > "$out/rendered/helm-pvc.yaml"
  helm template tide deploy/helm/tide --set "$HELM_CREDENTIALS" > "$out/rendered/helm-credentials.yaml"
  if helm template tide deploy/helm/tide --set "$HELM_SHARED_ADMIN" >/dev/null 2>&1; then
    echo "deploy-check: FAIL: the chart rendered an admin key sharing the inference key's Secret" >&2; exit 1
  fi
else
  echo "helm: not available (no Debian 12 package; npm's wrappers download it from GitHub): rendering with"
  echo "      build/tools/helm-render, Helm's template engine (text/template + Sprig v3), not helm itself"
  HR=build/tools/helm-render
  $HR --lint deploy/helm/tide
  $HR --name tide deploy/helm/tide > "$out/rendered/helm-default.yaml"
  $HR --name tide --set autoscaling.enabled=false,model.existingClaim=models deploy/helm/tide > "$out/rendered/helm-pvc.yaml"
  $HR --name tide --set probes.protocol=http deploy/helm/tide > "$out/rendered/helm-http-probes.yaml"
  $HR --name tide --set "$HELM_CREDENTIALS" deploy/helm/tide > "$out/rendered/helm-credentials.yaml"
  echo "rendered deploy/helm/tide: $(cat "$out"/rendered/helm-*.yaml | grep -c '^kind:') objects in 4 value sets"
  if $HR --name tide --set "$HELM_SHARED_ADMIN" deploy/helm/tide >/dev/null 2>&1; then
    echo "deploy-check: FAIL: the chart rendered an admin key sharing the inference key's Secret" >&2; exit 1
  fi
  echo "self-test: an admin key in the inference key's Secret fails the render"
  # Self-test: a template reading a value that values.yaml lacks must fail the lint.
  rm -rf "$out/selftest-chart" && cp -r deploy/helm/tide "$out/selftest-chart"
  sed -i '0,/\.Values\.model\.instances/s//.Values.model.instanses/' "$out/selftest-chart/templates/_helpers.tpl"
  if $HR --lint "$out/selftest-chart" >/dev/null 2>&1; then
    echo "deploy-check: FAIL: helm-render --lint accepted a misspelt value" >&2; exit 1
  fi
  echo "self-test: a template reading a misspelt value (.Values.model.instanses) fails the lint"
fi
node deploy/check/helm-static.mjs "$out" deploy/helm/tide

echo "== 3. schema and unknown-field validation"
node deploy/check/validate.mjs "$out" "$out"/rendered/*.yaml deploy/kserve/*.yaml
sed -e '0,/readinessProbe:/s//readinesProbe:/' "$out/rendered/kustomize-dev.yaml" > "$out/selftest-typo.yaml"
sed -e '0,/replicas: 1/s//replicas: one/' "$out/rendered/kustomize-dev.yaml" > "$out/selftest-type.yaml"
for bad in "$out/selftest-typo.yaml" "$out/selftest-type.yaml"; do
  if node deploy/check/validate.mjs "$out" "$bad" >/dev/null 2>&1; then
    echo "deploy-check: FAIL: the validator accepted $bad" >&2; exit 1
  fi
done
echo "self-test: a misspelt field (readinesProbe) and a wrong type (replicas: one) are rejected"

echo "== 4. consistency"
node deploy/check/consistency.mjs "$out" "$out"/rendered/*.yaml deploy/kserve/servingruntime.yaml
# Self-test: a liveness probe asking for readiness, and a gRPC probe on a port tide does not
# serve gRPC on, are rejected.
sed -e '0,/service: liveness/s//service: readiness/' "$out/rendered/kustomize-dev.yaml" > "$out/selftest-probe.yaml"
/usr/bin/python3 - "$out/rendered/kustomize-dev.yaml" "$out/selftest-probe-port.yaml" <<'PY'
import sys
text = open(sys.argv[1]).read()
probe = "grpc:\n            port: 8001\n            service: readiness"
assert probe in text, "the dev overlay has no gRPC readiness probe on 8001: update this self-test"
open(sys.argv[2], "w").write(text.replace(probe, probe.replace("8001", "8003"), 1))
PY
# ... and so are a key given in args, and an admin key mounted from the inference key's Secret.
/usr/bin/python3 - "$out/rendered/kustomize-dev.yaml" "$out" <<'PY'
import re, sys
text, out = open(sys.argv[1]).read(), sys.argv[2]
arg = "- --api-key-file=/etc/tide/api-key/api-key"
assert arg in text, "the dev overlay passes no --api-key-file: update this self-test"
open(f"{out}/selftest-key-arg.yaml", "w").write(text.replace(arg, arg + "\n        - --api-key=k-in-args", 1))
inference = re.search(r"secretName: (dev-tide-api-key\S*)", text).group(1)
admin = re.search(r"secretName: (dev-tide-admin-api-key\S*)", text).group(1)
open(f"{out}/selftest-shared-admin.yaml", "w").write(text.replace(f"secretName: {admin}", f"secretName: {inference}"))
PY
for bad in "$out/selftest-probe.yaml" "$out/selftest-probe-port.yaml" "$out/selftest-key-arg.yaml" "$out/selftest-shared-admin.yaml"; do
  if node deploy/check/consistency.mjs "$out" "$bad" >/dev/null 2>&1; then
    echo "deploy-check: FAIL: the consistency check accepted $bad" >&2; exit 1
  fi
done
echo "self-test: a liveness probe of the readiness service, a gRPC probe off the gRPC port, a key in args and"
echo "           an admin key from the inference key's Secret are rejected"

if [ "${SKIP_PLAY:-0}" = 1 ]; then echo "== 5. podman kube play: skipped (SKIP_PLAY=1)"; echo "deploy-check: PASSED"; exit 0; fi
echo "== 5. podman kube play (dev overlay)"
scripts/deploy/install-tools.sh image
P=scripts/podman.sh
$P image exists localhost/tide:latest || scripts/deploy/image.sh
$P image exists localhost/tide-models:latest || IMAGE=localhost/tide-models:latest IMAGE_MODELS=baked scripts/deploy/image.sh
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# Three test-only changes to the rendered Deployment, nothing else: the container port is published
# on a loopback host port; the pod's restartPolicy is OnFailure, because podman 4.3's kube
# play applies the pod's Always policy to init containers too and restarts them forever; and the
# two Secret volumes become hostPath folders holding the same key files (podman's kube play lists
# no Secret volumes among the types it mounts), laid out as the kubelet would, readable by uid 10001.
rm -rf "$out/play-keys"
for name in api-key admin-api-key; do
  install -D -m 0444 "deploy/k8s/overlays/dev/secrets/$name" "$out/play-keys/$name/$name"
done
/usr/bin/python3 - "$out/rendered/kustomize-dev.yaml" "$out" "$port" <<'PY'
import os, re, sys
src, out, port = sys.argv[1:]
docs = open(src).read().split("\n---\n")
open(f"{out}/play-configmap.yaml", "w").write(next(d for d in docs if "\nkind: ConfigMap" in "\n" + d))
dep = next(d for d in docs if "\nkind: Deployment" in "\n" + d)
dep = dep.replace("        - containerPort: 8000\n",
                  f"        - containerPort: 8000\n          hostIP: 127.0.0.1\n          hostPort: {port}\n", 1)
dep = dep.replace("\n    spec:\n", "\n    spec:\n      restartPolicy: OnFailure\n", 1)
keys = os.path.abspath(f"{out}/play-keys")
dep = dep.rstrip("\n") + "\n"  # the last volume may end the document
dep, n = re.subn(r"(- name: (api-key|admin-api-key)\n)( +)secret:\n(?:\3 .*\n)+",
                 lambda m: f"{m[1]}{m[3]}hostPath:\n{m[3]}  path: {keys}/{m[2]}\n{m[3]}  type: Directory\n", dep)
assert f"hostPort: {port}" in dep and "restartPolicy: OnFailure" in dep and n == 2, n
open(f"{out}/play-deployment.yaml", "w").write(dep)
PY
cleanup() { $P kube down "$out/play-deployment.yaml" >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup
$P kube play --configmap "$out/play-configmap.yaml" "$out/play-deployment.yaml" >"$out/play.log" 2>&1 || { cat "$out/play.log" >&2; exit 1; }
start=$(date +%s)
until [ "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v2/health/ready")" = 200 ]; do
  [ $(( $(date +%s) - start )) -lt 300 ] || { $P logs dev-tide-pod-0-tide 2>&1 | tail -20; echo "deploy-check: FAIL: pod not ready after 300 s" >&2; exit 1; }
  sleep 1
done
api_key=$(< deploy/k8s/overlays/dev/secrets/api-key) admin_key=$(< deploy/k8s/overlays/dev/secrets/admin-api-key)
rerank='{"query":"what is a panda?","texts":["The giant panda is a bear.","Paris is in France."]}'
code=$(curl -s -m 30 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/rerank" -H 'Content-Type: application/json' -d "$rerank")
[ "$code" = 401 ] || { echo "deploy-check: FAIL: rerank without the key answered $code, not 401" >&2; exit 1; }
body=$(curl -s -m 30 "http://127.0.0.1:$port/rerank" -H 'Content-Type: application/json' \
  -H "Authorization: Bearer $api_key" -d "$rerank")
echo "$body" | /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); assert sorted(x["index"] for x in r)==[0,1]' \
  || { echo "deploy-check: FAIL: rerank answered $body" >&2; exit 1; }
index() { curl -s -m 10 -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' "http://127.0.0.1:$port/v2/repository/index" -H "Authorization: Bearer $1"; }
code=$(index "$api_key")
[ "$code" != 200 ] || { echo "deploy-check: FAIL: the inference key reached the repository API" >&2; exit 1; }
[ "$(index "$admin_key")" = 200 ] || { echo "deploy-check: FAIL: the admin key did not reach the repository API" >&2; exit 1; }
deployed=$($P exec dev-tide-pod-0-tide sh -c 'grep -c "intra_op_threads" /models/minilm-l6/config.pbtxt; id -u')
# Read-only root, /tmp an emptyDir: the fused graph must still go to an unnamed file there.
pod_log=$($P logs dev-tide-pod-0-tide 2>&1)
if grep -q 'the fused graph stays in memory' <<<"$pod_log"; then
  echo "deploy-check: FAIL: $(grep -m1 'stays in memory' <<<"$pod_log")" >&2; exit 1
fi
echo "pod ready after $(( $(date +%s) - start )) s on 127.0.0.1:$port; rerank: 401 without key, with it $body;"
echo "repository index: $code with the inference key, 200 with the admin key; uid $(echo $deployed | cut -d' ' -f2), deployed config.pbtxt in place"
echo "deploy-check: PASSED"
