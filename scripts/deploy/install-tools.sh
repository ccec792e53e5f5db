#!/usr/bin/env bash
# Installs the host tools that the deployment targets need (make image, image-test, deploy-check,
# replicas-test): podman with runc (crun refuses hosts with hybrid cgroups), mmdebstrap to build
# the Debian 12 base without a registry, haproxy for the local multi-replica balancer, and
# kubectl (with built-in kustomize), and build/tools/helm-render (deploy/check/helm-render: Helm's
# template engine built from Debian's Go packages, because no helm binary can be installed here).
# Does nothing for a tool already present. Not run by CI.
#
#   scripts/deploy/install-tools.sh [image|k8s|replicas|all]   (default all)
set -euo pipefail
want=${1:-all}
pkgs=()
need() { command -v "$1" >/dev/null 2>&1 || pkgs+=("$2"); }
case $want in
  image|all) need podman podman; need runc runc; need mmdebstrap mmdebstrap
             # podman kube play builds its pod infra (pause) image around catatonit
             [ -x /usr/libexec/podman/catatonit ] || command -v catatonit >/dev/null || pkgs+=(catatonit)
             # podman needs newuidmap only for rootless use; slirp/netavark come with podman
             ;;&
  k8s|all)   need kubectl kubernetes-client; need node nodejs; need npm npm; need go golang-go
             for p in golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev golang-gopkg-yaml.v3-dev; do
               dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || pkgs+=("$p")
             done ;;&
  replicas|all) need haproxy haproxy ;;
  image|k8s) ;;
  *) echo "usage: $0 [image|k8s|replicas|all]" >&2; exit 2 ;;
esac
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "install-tools: apt-get install ${pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi
case $want in
  k8s|all)
    # Rebuilt when its source is newer than the binary (GOPATH mode: Debian's Go packages, offline).
    src=deploy/check/helm-render/main.go bin=build/tools/helm-render
    if [ ! -x "$bin" ] || [ "$src" -nt "$bin" ]; then
      mkdir -p build/tools
      (cd deploy/check/helm-render && GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$PWD/../../../build/tools/go-cache" \
         GOFLAGS= go build -o "../../../$bin" .)
      echo "install-tools: built $bin"
    fi ;;
esac
