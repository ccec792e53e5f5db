#!/usr/bin/env bash
# Builds the tide OCI image (make image). Defaults fit a machine with no container registry:
# the base is the mmdebstrap-built localhost/debian:12 (scripts/deploy/base-image.sh, skipped when
# present) and the binary is the host build (BUILD_FROM=host), staged by stage-runtime.sh.
#
#   IMAGE=localhost/tide:latest BUILD_FROM=host|source IMAGE_MODELS=mount|baked MODEL_REPOSITORY=models \
#   BASE=localhost/debian:12 BUILD_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt scripts/deploy/image.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
IMAGE=${IMAGE:-localhost/tide:latest}
BUILD_FROM=${BUILD_FROM:-host}
IMAGE_MODELS=${IMAGE_MODELS:-mount}
MODEL_REPOSITORY=${MODEL_REPOSITORY:-models}
BASE=${BASE:-localhost/debian:12}
TIDE_BINARY=${TIDE_BINARY:-build/tide}
command -v podman >/dev/null && command -v runc >/dev/null || scripts/deploy/install-tools.sh image
[ "$BASE" = localhost/debian:12 ] && scripts/deploy/base-image.sh "$BASE"
mkdir -p build/image-stage/models
if [ "$BUILD_FROM" = host ]; then
  scripts/deploy/stage-runtime.sh "$TIDE_BINARY" build/image-stage/root
fi
rm -rf build/image-stage/models; mkdir -p build/image-stage/models
if [ "$IMAGE_MODELS" = baked ]; then cp -rL "$MODEL_REPOSITORY"/. build/image-stage/models/; fi
# BUILD_FROM=source fetches the ONNX Runtime SDK from the npm registry inside the build. Behind a
# TLS-intercepting proxy the build stage must trust the same CAs as this host: BUILD_CA_BUNDLE (default
# the host's bundle, when present; empty = none) is mounted for the build's RUN steps only and never
# lands in an image layer.
build_volumes=()
BUILD_CA_BUNDLE=${BUILD_CA_BUNDLE-/etc/ssl/certs/ca-certificates.crt}
if [ "$BUILD_FROM" = source ] && [ -n "$BUILD_CA_BUNDLE" ] && [ -f "$BUILD_CA_BUNDLE" ]; then
  build_volumes+=(--volume "$(realpath "$BUILD_CA_BUNDLE"):/etc/tide-build-ca.crt:ro")
fi
start=$(date +%s)
scripts/podman.sh build --format docker -f Containerfile "${build_volumes[@]}" \
  --build-arg BASE="$BASE" --build-arg BUILD_FROM="$BUILD_FROM" --build-arg MODELS="$IMAGE_MODELS" \
  -t "$IMAGE" . 
echo "image: $IMAGE built in $(( $(date +%s) - start )) s, $(scripts/podman.sh image inspect --format '{{.Size}}' "$IMAGE") bytes"
