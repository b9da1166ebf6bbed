#!/usr/bin/env bash
# Builds the agentd image without a registry: a Debian rootfs (essential +
# ca-certificates) with the agentd binary built here, static (CGO off), run
# as uid 10001 with its data in /var/lib/agentd: the same image as the root
# Dockerfile builds, which needs Docker Hub's golang and debian images.
# deploy/image/run.sh runs it; the compose stack uses it too.
#
# Two steps: the rootfs is a base image (BASE) made once, since debootstrapping
# takes minutes, and kept; the binary of this checkout is a layer put on it
# every time, in seconds. So the image never holds an older agentd than the
# checkout's (FORCE=1 makes the base again too).
#
# usage: deploy/image/build.sh [image]   (default localhost/agentd:local)
# env:   VERSION (default: git describe), BASE (default localhost/agentd-base:local),
#        FORCE, MIRROR, SUITE, ENGINE (deploy/lib/image.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=/dev/null
. deploy/lib/image.sh
image=${1:-localhost/agentd:local}
base=${BASE:-localhost/agentd-base:local}
version=${VERSION:-$(git describe --always --dirty 2>/dev/null || echo dev)}
engine=$(image_engine)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentd-image.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if [ -n "${FORCE:-}" ] || ! "$engine" image inspect "$base" >/dev/null 2>&1; then
  need_mmdebstrap
  echo "build: the base rootfs -> $base ($engine)"
  debian_rootfs ca-certificates "$tmp/base.tar" \
    --customize-hook='echo "agentd:x:10001:10001:agentd:/var/lib/agentd:/usr/sbin/nologin" >> "$1/etc/passwd"' \
    --customize-hook='echo "agentd:x:10001:" >> "$1/etc/group"' \
    --customize-hook='install -d -o 10001 -g 10001 -m 0700 "$1/var/lib/agentd"'
  "$engine" import \
    --change 'USER 10001:10001' \
    --change 'WORKDIR /var/lib/agentd' \
    --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
    --change 'ENV AGENTD_ADDR=0.0.0.0:8080' \
    --change 'ENV AGENTD_DATA_DIR=/var/lib/agentd' \
    --change 'EXPOSE 8080' \
    --change 'ENTRYPOINT ["agentd"]' \
    "$tmp/base.tar" "$base" >/dev/null
  rm -f "$tmp/base.tar"
fi

echo "build: agentd $version -> $image ($engine)"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$tmp/agentd" ./cmd/agentd
cat >"$tmp/Containerfile" <<CONTAINERFILE
FROM $base
COPY agentd /usr/local/bin/agentd
LABEL org.opencontainers.image.source=https://github.com/agentd/agentd \\
      org.opencontainers.image.version=$version \\
      org.opencontainers.image.title=agentd
CONTAINERFILE
# The base is local: never look for it in a registry (there is none).
pull=()
[ "$engine" = podman ] && pull=(--pull=never)
old=$("$engine" image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
"$engine" build -q "${pull[@]}" -f "$tmp/Containerfile" -t "$image" "$tmp" >/dev/null
# The image the tag held before is dropped, unless a container still uses it.
if [ -n "$old" ] && [ "$old" != "$("$engine" image inspect -f '{{.Id}}' "$image")" ]; then
  "$engine" rmi "$old" >/dev/null 2>&1 || true
fi
echo "build: built $image"
