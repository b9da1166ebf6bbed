#!/usr/bin/env bash
# Builds the compose stack's images without a registry, from Debian packages
# (mmdebstrap; see deploy/lib/image.sh):
#
#   agentd:local            deploy/image/build.sh
#   agentd-haproxy:local    haproxy
#   agentd-prometheus:local prometheus (and promtool)
#
# Postgres comes from internal/store/pgtest/build-image.sh (agentd-postgres-test).
# Grafana has no Debian package: the compose file keeps it in a profile.
# An image that exists already is kept, but agentd's (its binary is this
# checkout's, on a kept base); FORCE=1 rebuilds them all.
#
# usage: deploy/compose/build-images.sh        then, from deploy/compose:
#   AGENTD_IMAGE=localhost/agentd:local HAPROXY_IMAGE=localhost/agentd-haproxy:local \
#   PROMETHEUS_IMAGE=localhost/agentd-prometheus:local POSTGRES_IMAGE=localhost/agentd-postgres-test:latest \
#   POSTGRES_USER=postgres POSTGRES_DB=postgres podman-compose up -d
# env: MIRROR, SUITE (bookworm), ENGINE (podman or docker), VERSION, FORCE
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=/dev/null
. deploy/lib/image.sh
engine=$(image_engine)
version=${VERSION:-$(git describe --always --dirty 2>/dev/null || echo dev)}
need_mmdebstrap

tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentd-images.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

exists() { [ -z "${FORCE:-}" ] && "$engine" image inspect "$1" >/dev/null 2>&1; }

# package_image IMAGE PACKAGE [import changes...]: one Debian package on the
# essential set, labelled like every image of the stack.
package_image() {
  local img=$1 pkg=$2
  shift 2
  exists "$img" && return
  echo "build-images: $pkg (${SUITE:-bookworm}) -> $img"
  debian_rootfs "$pkg" "$tmp/$pkg.tar"
  "$engine" import --change "LABEL org.opencontainers.image.source=https://github.com/agentd/agentd" \
    --change "LABEL org.opencontainers.image.version=$version" \
    --change "LABEL org.opencontainers.image.title=agentd-$pkg" "$@" \
    "$tmp/$pkg.tar" "$img" >/dev/null
  rm -f "$tmp/$pkg.tar"
}

# agentd itself is built every time (its base is kept): the stack runs this checkout.
VERSION=$version deploy/image/build.sh localhost/agentd:local
package_image localhost/agentd-haproxy:local haproxy \
  --change 'USER haproxy' --change 'ENV PATH=/usr/sbin:/usr/bin:/bin' \
  --change 'CMD ["haproxy", "-W", "-db", "-f", "/etc/haproxy/haproxy.cfg"]'
package_image localhost/agentd-prometheus:local prometheus \
  --change 'USER prometheus' --change 'ENV PATH=/usr/bin:/bin' \
  --change 'ENTRYPOINT ["prometheus"]'
exists localhost/agentd-postgres-test:latest || internal/store/pgtest/build-image.sh localhost/agentd-postgres-test:latest
echo "build-images: done"
