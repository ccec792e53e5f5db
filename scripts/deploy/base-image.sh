#!/usr/bin/env bash
# Builds the Debian 12 base image localhost/debian:12 without a container registry: mmdebstrap
# writes a minbase bookworm root file system from the Debian mirror as a tarball, `podman import`
# turns it into an image. Idempotent: nothing happens when the image exists (about 0.1 s).
# Where a registry is reachable this step is not needed: build with --build-arg BASE=debian:12.
#
#   scripts/deploy/base-image.sh [IMAGE]   (default localhost/debian:12)
set -euo pipefail
cd "$(dirname "$0")/../.."
image=${1:-localhost/debian:12}
if scripts/podman.sh image exists "$image"; then exit 0; fi
command -v mmdebstrap >/dev/null || scripts/deploy/install-tools.sh image
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "base-image: mmdebstrap bookworm (minbase) -> $image"
# minbase: essential + apt; no docs, man pages or locales (the runtime image has no shell users).
mmdebstrap --variant=minbase --mode=root --format=tar \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --include=ca-certificates \
  bookworm "$tmp/rootfs.tar" >"$tmp/mmdebstrap.log" 2>&1 || { tail -20 "$tmp/mmdebstrap.log" >&2; exit 1; }
scripts/podman.sh import --change 'CMD ["/bin/bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  "$tmp/rootfs.tar" "$image" >/dev/null
echo "base-image: $image ($(scripts/podman.sh image inspect --format '{{.Size}}' "$image") bytes)"
