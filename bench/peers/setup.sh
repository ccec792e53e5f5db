#!/usr/bin/env bash
# Installs what the benchmark peers and third-party clients need, only what is missing (a second
# run takes about a second):
#   apt: python3-fastapi python3-uvicorn python3-torch (the prototype), libopenblas0-pthread (so
#        PyTorch's BLAS is OpenBLAS, measured fairly), python3-locust, wrk, nodejs/npm
#   npm: onnxruntime-node@1.30.0 into third_party/peers/node (git-ignored), with --ignore-scripts:
#        its install script fetches from a host that is unreachable here; the CPU binary ships in
#        the package, and this script checks that it loads.
#   npm: node-llama-cpp@3.22.1 with its prebuilt linux-x64 CPU binary (@node-llama-cpp/linux-x64@3.22.1)
#        into third_party/peers/llama (git-ignored; the llama.cpp peer, bench/peers/llama_server.js),
#        with --ignore-scripts (its postinstall would look for or build a binary; the prebuilt one is
#        all the peer uses: getLlama({gpu: false, build: "never"})) and --omit=optional (the CUDA,
#        Vulkan and other platforms' binaries, ~650 MB, are not needed); this script checks that the
#        binary loads on this CPU and prints what it reports (AVX2 / AVX-512 / VNNI).
# usage: bench/peers/setup.sh            (as root; apt-get runs without sudo here)
# env: TIDE_NODE_ORT: an onnxruntime-node module installed elsewhere (node_server.js loads it), then
#      nothing is installed into third_party/peers/node; TIDE_NODE_LLAMA_CPP: likewise, a node-llama-cpp
#      package folder installed elsewhere (llama_server.js loads it)
set -euo pipefail
cd "$(dirname "$0")/../.."

ORT_NODE_VERSION=1.30.0
NODE_DIR=third_party/peers/node
LLAMA_NODE_VERSION=3.22.1
LLAMA_DIR=third_party/peers/llama

missing=()
for pkg in python3-fastapi python3-uvicorn python3-torch libopenblas0-pthread python3-locust wrk; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: apt-get install ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

ORT_NODE_MODULE=./$NODE_DIR/node_modules/onnxruntime-node
if [ -n "${TIDE_NODE_ORT:-}" ]; then
  ORT_NODE_MODULE=$TIDE_NODE_ORT  # the peer's own override (node_server.js): installed elsewhere, no npm here
  echo "setup: TIDE_NODE_ORT=$TIDE_NODE_ORT (not installing into $NODE_DIR)"
fi
installed=$(node -e "try{console.log(require('$ORT_NODE_MODULE/package.json').version)}catch(e){}" 2>/dev/null || true)
if [ -z "${TIDE_NODE_ORT:-}" ] && [ "$installed" != "$ORT_NODE_VERSION" ]; then
  echo "setup: npm install onnxruntime-node@$ORT_NODE_VERSION --ignore-scripts into $NODE_DIR"
  mkdir -p "$NODE_DIR"
  [ -f "$NODE_DIR/package.json" ] || echo '{"name":"tide-bench-peers","private":true}' > "$NODE_DIR/package.json"
  (cd "$NODE_DIR" && npm install --silent --no-audit --no-fund --ignore-scripts "onnxruntime-node@$ORT_NODE_VERSION")
fi

LLAMA_MODULE=./$LLAMA_DIR/node_modules/node-llama-cpp
if [ -n "${TIDE_NODE_LLAMA_CPP:-}" ]; then
  LLAMA_MODULE=$TIDE_NODE_LLAMA_CPP
  echo "setup: TIDE_NODE_LLAMA_CPP=$TIDE_NODE_LLAMA_CPP (not installing into $LLAMA_DIR)"
fi
installed=$(node -e "try{console.log(require('$LLAMA_MODULE/package.json').version)}catch(e){}" 2>/dev/null || true)
if [ -z "${TIDE_NODE_LLAMA_CPP:-}" ] && [ "$installed" != "$LLAMA_NODE_VERSION" ]; then
  echo "setup: npm install node-llama-cpp@$LLAMA_NODE_VERSION @node-llama-cpp/linux-x64@$LLAMA_NODE_VERSION --ignore-scripts --omit=optional into $LLAMA_DIR"
  mkdir -p "$LLAMA_DIR"
  [ -f "$LLAMA_DIR/package.json" ] || echo '{"name":"tide-bench-llama-peer","private":true}' > "$LLAMA_DIR/package.json"
  (cd "$LLAMA_DIR" && npm install --silent --no-audit --no-fund --ignore-scripts --omit=optional \
    "node-llama-cpp@$LLAMA_NODE_VERSION" "@node-llama-cpp/linux-x64@$LLAMA_NODE_VERSION")
fi

# Checks: each peer's runtime loads (fails loudly here rather than as an empty table row later).
node -e "const ort=require('$ORT_NODE_MODULE'); \
  if(!ort.listSupportedBackends().some(b=>b.name==='cpu')) throw new Error('no cpu backend'); \
  console.log('setup: onnxruntime-node', require('$ORT_NODE_MODULE/package.json').version, 'loads (cpu backend)')"
TIDE_NODE_LLAMA_CPP=$(cd "$LLAMA_MODULE" && pwd) node bench/peers/llama_server.js --check | sed 's/^llama:/setup:/'
node -e "require('./third_party/node/node_modules/tokenizers'); console.log('setup: npm tokenizers loads')" ||
  { echo "setup: third_party/node/node_modules/tokenizers missing: run scripts/bootstrap.sh" >&2; exit 1; }
/usr/bin/python3 - <<'PY'
import fastapi, uvicorn, torch
print(f"setup: fastapi {fastapi.__version__}, uvicorn {uvicorn.__version__}, torch {torch.__version__}")
PY
echo "setup: $(wrk -v 2>&1 | head -1)"
echo "setup: locust $(dpkg-query -W -f='${Version}' python3-locust)"
