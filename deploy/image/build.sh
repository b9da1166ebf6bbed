#!/usr/bin/env bash
# Builds the agentd image without a registry: a Debian rootfs (essential +
# ca-certificates) with the agentd binary built here, static (CGO off), run
# as uid 10001 with its data in /var/lib/agentd: the same image as the root
# Dockerfile builds, which needs Docker Hub's golang and debian images.
# deploy/image/run.sh runs it; the compose stack uses it too.
#
# usage: deploy/image/build.sh [image]   (default localhost/agentd:local)
# env:   VERSION (default: git describe), MIRROR, SUITE, ENGINE (deploy/lib/image.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=/dev/null
. deploy/lib/image.sh
image=${1:-localhost/agentd:local}
version=${VERSION:-$(git describe --always --dirty 2>/dev/null || echo dev)}
engine=$(image_engine)
need_mmdebstrap

tmp=$(mktemp -d /tmp/agentd-image.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

echo "build: agentd $version -> $image ($engine)"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$tmp/agentd" ./cmd/agentd
# uid/gid 10001, no shell: the same user as the Dockerfile's.
debian_rootfs ca-certificates "$tmp/agentd.tar" \
  --customize-hook="install -m 0755 '$tmp/agentd' \"\$1/usr/local/bin/agentd\"" \
  --customize-hook='echo "agentd:x:10001:10001:agentd:/var/lib/agentd:/usr/sbin/nologin" >> "$1/etc/passwd"' \
  --customize-hook='echo "agentd:x:10001:" >> "$1/etc/group"' \
  --customize-hook='install -d -o 10001 -g 10001 -m 0700 "$1/var/lib/agentd"'
"$engine" import \
  --change "LABEL org.opencontainers.image.source=https://github.com/agentd/agentd" \
  --change "LABEL org.opencontainers.image.version=$version" \
  --change 'LABEL org.opencontainers.image.title=agentd' \
  --change 'USER 10001:10001' \
  --change 'WORKDIR /var/lib/agentd' \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
  --change 'ENV AGENTD_ADDR=0.0.0.0:8080' \
  --change 'ENV AGENTD_DATA_DIR=/var/lib/agentd' \
  --change 'EXPOSE 8080' \
  --change 'ENTRYPOINT ["agentd"]' \
  "$tmp/agentd.tar" "$image" >/dev/null
echo "build: built $image"
