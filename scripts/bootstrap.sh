#!/usr/bin/env bash
# Installs everything tide needs to build, test and serve on Debian 12:
#   1. Debian packages (compiler, libraries incl. gRPC C++ 1.51, Python torch/onnx for model export,
#      Python grpcio + grpc_tools for the gRPC black-box tests);
#   2. the ONNX Runtime 1.29.0 SDK from the npm registry, integrity-checked and laid out as an
#      ordinary ONNX Runtime install (include/, lib/) under third_party/onnxruntime (git-ignored);
#   3. the reference HF tokenizer (npm tokenizers@0.23.2) for parity tests, under third_party/node.
# Idempotent: each step is skipped when already done, so a second run takes about a second.
#
#   scripts/bootstrap.sh               everything (build, test, export models, benchmarks)
#   scripts/bootstrap.sh --build-only  only what compiling the tide binary needs (steps 1 without the
#                                      Python packages, 2; no step 3): the Containerfile's source build
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_ONLY=0
case "${1:-}" in
  --build-only) BUILD_ONLY=1 ;;
  "") ;;
  *) echo "usage: $0 [--build-only]" >&2; exit 2 ;;
esac

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  clang libclang-rt-14-dev
  libboost-dev libboost-system-dev libabsl-dev libutf8proc-dev nlohmann-json3-dev libcli11-dev
  libspdlog-dev libgtest-dev libgmock-dev libbenchmark-dev
  libprotobuf-dev protobuf-compiler libonnx-dev libpcre2-dev zlib1g-dev
  libgrpc++-dev protobuf-compiler-grpc libssl-dev
  curl openssl
)
# Model export, the gRPC black-box client stubs, the PyTorch peer and the word list some tools and
# benchmarks draw text from: tests and benchmarks, not the binary.
[ "$BUILD_ONLY" = 1 ] || APT_PACKAGES+=(
  python3-grpcio python3-grpc-tools
  python3 python3-torch python3-onnx python3-numpy libopenblas0-pthread
  wamerican
)
# Node.js and npm (ONNX Runtime SDK download, parity reference): Debian's unless one is already there
# (NodeSource's nodejs bundles npm and conflicts with Debian's npm package).
command -v node >/dev/null 2>&1 || APT_PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || APT_PACKAGES+=(npm)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq || $SUDO apt-get update
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# --- ONNX Runtime SDK ----------------------------------------------------------------------------
ORT_VERSION=1.29.0
ORT_NPM=com.github.asus4.onnxruntime@0.4.9
# sha512 of the npm tarball as published in the registry's "dist.integrity" field.
ORT_DIR="$ROOT/third_party/onnxruntime"
if [ ! -f "$ORT_DIR/.complete-$ORT_VERSION" ]; then
  echo "bootstrap: fetching ONNX Runtime $ORT_VERSION SDK ($ORT_NPM) from the npm registry"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  expected=$(npm view "$ORT_NPM" dist.integrity)
  (cd "$tmp" && npm pack --silent "$ORT_NPM" >/dev/null)
  tgz=$(ls "$tmp"/*.tgz)
  actual="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ -n "${TIDE_ORT_SHA512:-}" ]; then expected="$TIDE_ORT_SHA512"; fi
  if [ "$actual" != "$expected" ]; then
    echo "bootstrap: integrity check failed for $ORT_NPM: expected $expected, got $actual" >&2
    exit 1
  fi
  tar -xzf "$tgz" -C "$tmp"
  hdr="$tmp/package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64_x86_64-simulator/onnxruntime.framework/Headers"
  lib="$tmp/package/Plugins/Linux/x64/libonnxruntime.so"
  [ -f "$lib" ] && [ -d "$hdr" ] || { echo "bootstrap: unexpected layout in $ORT_NPM" >&2; exit 1; }
  rm -rf "$ORT_DIR"; mkdir -p "$ORT_DIR/include" "$ORT_DIR/lib"
  cp "$hdr"/*.h "$ORT_DIR/include/"
  cp "$lib" "$ORT_DIR/lib/libonnxruntime.so.$ORT_VERSION"
  ln -sf "libonnxruntime.so.$ORT_VERSION" "$ORT_DIR/lib/libonnxruntime.so.1"
  ln -sf "libonnxruntime.so.1" "$ORT_DIR/lib/libonnxruntime.so"
  echo "$actual" > "$ORT_DIR/.complete-$ORT_VERSION"
  echo "bootstrap: ONNX Runtime SDK at $ORT_DIR"
fi

# --- reference tokenizer for parity tests ---------------------------------------------------------
NODE_DIR="$ROOT/third_party/node"
if [ "$BUILD_ONLY" = 0 ] && [ ! -d "$NODE_DIR/node_modules/tokenizers" ]; then
  echo "bootstrap: installing npm tokenizers@0.23.2 (parity reference)"
  mkdir -p "$NODE_DIR"
  (cd "$NODE_DIR" && [ -f package.json ] || echo '{"name":"tide-node-tools","private":true}' > package.json)
  (cd "$NODE_DIR" && npm install --silent --no-audit --no-fund tokenizers@0.23.2) || \
    echo "bootstrap: warning: npm tokenizers not installed; parity tests will skip" >&2
fi
echo "bootstrap: ok"
