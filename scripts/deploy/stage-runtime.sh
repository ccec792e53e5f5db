#!/usr/bin/env bash
# Lays out what the runtime image holds, under DEST: DEST/usr/local/bin/tide and every shared
# library that tide loads (ONNX Runtime and the Debian libraries, as `ldd` resolves them) under
# DEST/usr/local/lib/tide, except the glibc/libstdc++ family that the Debian 12 base already has.
# Runs on the host (BUILD_FROM=host: the binary built by `make build`) or inside the image's build
# stage (BUILD_FROM=source); both are Debian 12, so the libraries match the base.
#
#   scripts/deploy/stage-runtime.sh TIDE_BINARY DEST
set -euo pipefail
bin=$1 dest=$2
rm -rf "$dest"; mkdir -p "$dest/usr/local/bin" "$dest/usr/local/lib/tide" "$dest/etc/ld.so.conf.d"
install -m 0755 "$bin" "$dest/usr/local/bin/tide"
strip --strip-unneeded "$dest/usr/local/bin/tide" 2>/dev/null || true
ldd "$bin" | awk '/=> \//{print $3}' | while read -r lib; do
  case $(basename "$lib") in
    libc.so.*|libm.so.*|libdl.so.*|librt.so.*|libpthread.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*|libz.so.*) continue ;;
  esac
  cp -L "$lib" "$dest/usr/local/lib/tide/$(basename "$lib")"
done
echo /usr/local/lib/tide > "$dest/etc/ld.so.conf.d/tide.conf"
echo "stage-runtime: $(ls "$dest/usr/local/lib/tide" | wc -l) libraries, $(du -sh "$dest" | cut -f1) in $dest"
