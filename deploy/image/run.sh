#!/usr/bin/env bash
# Runs agentd from its container image, as `go run ./cmd/agentd` runs it from
# the source: on 127.0.0.1:8080 of this machine, no API keys, the embedded
# SQLite store (kept in the volume agentd-data), replay models. Builds the
# image first (deploy/image/build.sh) when the engine has none. Ctrl-C stops
# it; the container is removed, the volume kept.
#
# The container shares the host's network, so agentd listens on the host's
# loopback: without API keys it refuses any other address, and a port
# published from a container's own network would need one. Code execution
# needs a sandbox the container does not have (examples that run code get a
# 422 saying so); run agentd on the host or mount an engine's socket for that.
#
# usage: deploy/image/run.sh [serve flags...]        e.g. deploy/image/run.sh -log-level debug
# env:   AGENTD_IMAGE (localhost/agentd:local), AGENTD_VOLUME (agentd-data),
#        ENGINE (podman or docker; default podman when installed),
#        AGENTD_ADDR (127.0.0.1:8080); the AGENTD_*, OPENAI_* and OTEL_*
#        variables set here are passed on.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=/dev/null
. "$root/deploy/lib/image.sh"
engine=$(image_engine)
image=${AGENTD_IMAGE:-localhost/agentd:local}
volume=${AGENTD_VOLUME:-agentd-data}

if ! "$engine" image inspect "$image" >/dev/null 2>&1; then
  echo "run: no image $image yet: building it (once)" >&2
  "$root/deploy/image/build.sh" "$image"
fi

env_args=(-e "AGENTD_ADDR=${AGENTD_ADDR:-127.0.0.1:8080}")
while IFS= read -r name; do
  case $name in
    AGENTD_IMAGE | AGENTD_VOLUME | AGENTD_ADDR) ;;
    AGENTD_* | OPENAI_* | OTEL_*) env_args+=(-e "$name") ;;
  esac
done < <(compgen -e)

exec "$engine" run --rm --network host "${env_args[@]}" \
  -v "$volume:/var/lib/agentd" "$image" serve "$@"
