#!/usr/bin/env bash
# Builds the Postgres image that pgtest starts through testcontainers-go
# (AGENTD_TEST_POSTGRES=testcontainers) without a registry: a Debian rootfs
# with Debian's postgresql made by mmdebstrap from the host's mirror, imported
# into Podman (or Docker), the same way as deploy/sandbox/build-rootfs.sh
# builds the sandbox image. For tests only: trust authentication from
# anywhere, fsync off.
#
# usage: internal/store/pgtest/build-image.sh [image]   (default agentd-postgres-test:latest)
# env:   MIRROR, SUITE (bookworm), ENGINE (podman or docker)
set -euo pipefail

image=${1:-agentd-postgres-test:latest}
# shellcheck source=/dev/null
. "$(dirname "$0")/../../../deploy/lib/image.sh"
engine=$(image_engine)
need_mmdebstrap

tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentd-postgres-rootfs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The entrypoint: a fresh cluster on first start, reachable from the host
# through the engine's port mapping (hence "host all all all trust").
cat > "$tmp/entrypoint" <<'SH'
#!/bin/sh
set -e
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
data=/var/lib/postgresql/data
if [ ! -s "$data/PG_VERSION" ]; then
  "$bin/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C --no-sync >/dev/null
  echo "host all all all trust" >> "$data/pg_hba.conf"
fi
exec "$bin/postgres" -D "$data" -k /tmp -c listen_addresses='*' -c max_connections=300 \
  -c fsync=off -c synchronous_commit=off -c full_page_writes=off
SH

echo "build-image: postgresql from $(debian_mirror) (${SUITE:-bookworm}) -> $image ($engine)"
debian_rootfs postgresql "$tmp/rootfs.tar" \
  --customize-hook='rm -rf "$1"/var/lib/postgresql/[0-9]* "$1"/etc/postgresql/[0-9]*' \
  --customize-hook="install -m 0755 '$tmp/entrypoint' \"\$1/usr/local/bin/agentd-postgres\"" \
  --customize-hook='chroot "$1" install -d -o postgres -g postgres -m 0700 /var/lib/postgresql/data'

"$engine" import \
  --change 'USER postgres' \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'EXPOSE 5432' \
  --change 'STOPSIGNAL SIGINT' \
  --change 'CMD ["/usr/local/bin/agentd-postgres"]' \
  "$tmp/rootfs.tar" "$image" >/dev/null
echo "build-image: built $image"
