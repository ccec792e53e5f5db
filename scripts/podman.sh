#!/usr/bin/env bash
# podman with this project's settings (deploy/image/containers.conf: runc as the OCI runtime,
# capped ulimits, cgroupfs). Every image target calls podman through this wrapper, so nothing is
# configured on the machine itself. Arguments are passed to podman unchanged.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
export CONTAINERS_CONF="$here/deploy/image/containers.conf"
exec podman "$@"
