#!/usr/bin/env bash
# Creates the dev overlay's two keys (secrets/api-key, secrets/admin-api-key: random, mode 0600,
# git-ignored) that its secretGenerator turns into the Secrets dev-tide-api-key-<hash> and
# dev-tide-admin-api-key-<hash>. A key file already there is kept; delete it to get a new key (the
# next `kubectl apply -k` then makes a Secret of a new name, and the Deployment rolls onto it).
#
#   deploy/k8s/overlays/dev/make-keys.sh && kubectl apply -k deploy/k8s/overlays/dev
set -euo pipefail
dir="$(dirname "$0")/secrets"
mkdir -p "$dir"
umask 077
for name in api-key admin-api-key; do
  [ -s "$dir/$name" ] && continue
  # 32 random bytes as 43 URL-safe characters, one line.
  head -c 32 /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '=' > "$dir/$name"
  echo >> "$dir/$name"
  echo "make-keys: wrote $dir/$name"
done
