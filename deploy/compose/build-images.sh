#!/usr/bin/env bash
# Builds the compose stack's images without a registry, from Debian packages
# (mmdebstrap, as deploy/sandbox/build-rootfs.sh builds the sandbox image):
#
#   agentd:local            a Debian rootfs (essential + ca-certificates) with
#                           the agentd binary built here, static (CGO off)
#   agentd-haproxy:local    haproxy
#   agentd-prometheus:local prometheus (and promtool)
#
# Postgres comes from internal/store/pgtest/build-image.sh (agentd-postgres-test).
# Grafana has no Debian package: the compose file keeps it in a profile.
# An image that exists already is kept; FORCE=1 rebuilds.
#
# usage: deploy/compose/build-images.sh        then, from deploy/compose:
#   AGENTD_IMAGE=localhost/agentd:local HAPROXY_IMAGE=localhost/agentd-haproxy:local \
#   PROMETHEUS_IMAGE=localhost/agentd-prometheus:local POSTGRES_IMAGE=localhost/agentd-postgres-test:latest \
#   POSTGRES_USER=postgres POSTGRES_DB=postgres podman-compose up -d
# env: MIRROR, SUITE (bookworm), ENGINE (podman or docker), VERSION, FORCE
set -euo pipefail
cd "$(dirname "$0")/../.."
suite=${SUITE:-bookworm}
engine=${ENGINE:-$(command -v podman >/dev/null && echo podman || echo docker)}
version=${VERSION:-$(git describe --always --dirty 2>/dev/null || echo dev)}
# shellcheck source=/dev/null
. deploy/lib/debian-mirror.sh
MIRROR=$(debian_mirror)
command -v mmdebstrap >/dev/null || { echo "build-images: mmdebstrap is not installed (apt-get install mmdebstrap)" >&2; exit 1; }

tmp=$(mktemp -d /tmp/agentd-images.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

exists() { [ -z "${FORCE:-}" ] && "$engine" image inspect "$1" >/dev/null 2>&1; }

rootfs() { # rootfs <packages> <tar> [mmdebstrap options...]
  local packages=$1 tar=$2
  shift 2
  mmdebstrap --variant=essential --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    "$@" --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
    "$suite" "$tar" "$MIRROR"
}

labels=(--change "LABEL org.opencontainers.image.source=https://github.com/agentd/agentd"
  --change "LABEL org.opencontainers.image.version=$version")

img=localhost/agentd:local
if ! exists "$img"; then
  echo "build-images: agentd $version -> $img"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$tmp/agentd" ./cmd/agentd
  # uid/gid 10001, no shell: the same user as the Dockerfile's.
  rootfs ca-certificates "$tmp/agentd.tar" \
    --customize-hook="install -m 0755 '$tmp/agentd' \"\$1/usr/local/bin/agentd\"" \
    --customize-hook='echo "agentd:x:10001:10001:agentd:/var/lib/agentd:/usr/sbin/nologin" >> "$1/etc/passwd"' \
    --customize-hook='echo "agentd:x:10001:" >> "$1/etc/group"' \
    --customize-hook='install -d -o 10001 -g 10001 -m 0700 "$1/var/lib/agentd"'
  "$engine" import "${labels[@]}" \
    --change 'LABEL org.opencontainers.image.title=agentd' \
    --change 'USER 10001:10001' \
    --change 'WORKDIR /var/lib/agentd' \
    --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
    --change 'ENV AGENTD_ADDR=0.0.0.0:8080' \
    --change 'ENV AGENTD_DATA_DIR=/var/lib/agentd' \
    --change 'EXPOSE 8080' \
    --change 'ENTRYPOINT ["agentd"]' \
    "$tmp/agentd.tar" "$img" >/dev/null
  rm -f "$tmp/agentd.tar"
fi

img=localhost/agentd-haproxy:local
if ! exists "$img"; then
  echo "build-images: haproxy ($suite) -> $img"
  rootfs haproxy "$tmp/haproxy.tar"
  "$engine" import "${labels[@]}" --change 'LABEL org.opencontainers.image.title=agentd-haproxy' \
    --change 'USER haproxy' --change 'ENV PATH=/usr/sbin:/usr/bin:/bin' \
    --change 'CMD ["haproxy", "-W", "-db", "-f", "/etc/haproxy/haproxy.cfg"]' \
    "$tmp/haproxy.tar" "$img" >/dev/null
  rm -f "$tmp/haproxy.tar"
fi

img=localhost/agentd-prometheus:local
if ! exists "$img"; then
  echo "build-images: prometheus ($suite) -> $img"
  rootfs prometheus "$tmp/prometheus.tar"
  "$engine" import "${labels[@]}" --change 'LABEL org.opencontainers.image.title=agentd-prometheus' \
    --change 'USER prometheus' --change 'ENV PATH=/usr/bin:/bin' \
    --change 'ENTRYPOINT ["prometheus"]' \
    "$tmp/prometheus.tar" "$img" >/dev/null
  rm -f "$tmp/prometheus.tar"
fi

img=localhost/agentd-postgres-test:latest
if ! exists "$img"; then
  internal/store/pgtest/build-image.sh "$img"
fi
echo "build-images: done"
