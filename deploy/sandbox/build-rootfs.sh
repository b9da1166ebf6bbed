#!/usr/bin/env bash
# Builds the default sandbox image without a registry: a Debian rootfs made by
# mmdebstrap from the host's Debian mirror, imported into Podman (or Docker)
# with the same user, working directory and environment as the Dockerfile
# beside this script. CI uses it; see README.md here.
#
# usage: deploy/sandbox/build-rootfs.sh [image]   (default agentd-sandbox:latest)
#        deploy/sandbox/build-rootfs.sh --packages   prints the package list
#          (the image's org.agentd.sandbox.packages label: CI rebuilds an
#          image whose label differs)
# env:   MIRROR     Debian mirror (default: the first one apt uses here)
#        SUITE      Debian suite (default bookworm)
#        PACKAGES   comma-separated packages on top of the essential set
#        ENGINE     podman or docker (default: podman when installed)
set -euo pipefail

image=${1:-agentd-sandbox:latest}
suite=${SUITE:-bookworm}
# Keep this list equal to the apt-get line of the Dockerfile: Python with
# pip (through the egress proxy when a chat may reach an index), the
# scientific basics, and the HTTP and HTML libraries web tools import
# (AutoGen Studio's fetch_webpage and google_search: httpx, bs4, html2text).
packages=${PACKAGES:-python3,python3-pip,python3-numpy,python3-pandas,python3-requests,python3-httpx,python3-bs4,python3-html2text,ca-certificates}
if [ "$image" = --packages ]; then
  echo "$packages"
  exit 0
fi

# shellcheck source=/dev/null
. "$(dirname "$0")/../lib/image.sh"
engine=$(image_engine)
need_mmdebstrap

tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentd-sandbox-rootfs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The sandbox user is uid/gid 1000 with no shell and no password, the same as
# the Dockerfile's. It is written straight into passwd/group because the
# essential variant has no useradd. /work is the only writable place in a
# running sandbox (the root filesystem is mounted read-only), so it must
# exist and belong to that user.
echo "build-rootfs: $suite from $(debian_mirror) with $packages -> $image ($engine)"
debian_rootfs "$packages" "$tmp/rootfs.tar" \
  --customize-hook='echo "sandbox:x:1000:1000:agentd sandbox:/work:/usr/sbin/nologin" >> "$1/etc/passwd"' \
  --customize-hook='echo "sandbox:x:1000:" >> "$1/etc/group"' \
  --customize-hook='echo "sandbox:!:19000::::::" >> "$1/etc/shadow"' \
  --customize-hook='mkdir -p "$1/work" && chown 1000:1000 "$1/work" && chmod 0700 "$1/work"'

# pip: the root filesystem is read-only, so `pip install x` installs for the
# sandbox user under /work/.local (pip's own fallback) and is gone with the
# chat; Debian's PEP 668 marker would refuse even that, and a chat's sandbox
# is nobody's system Python. The label names the packages, so that CI
# rebuilds an image made from an older list.
"$engine" import \
  --change 'USER 1000:1000' \
  --change 'WORKDIR /work' \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
  --change 'ENV HOME=/work' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PYTHONDONTWRITEBYTECODE=1' \
  --change 'ENV PIP_BREAK_SYSTEM_PACKAGES=1' \
  --change 'ENV PIP_NO_CACHE_DIR=1' \
  --change 'ENV PIP_DISABLE_PIP_VERSION_CHECK=1' \
  --change "LABEL org.agentd.sandbox.packages=$packages" \
  --change 'LABEL org.opencontainers.image.title=agentd-sandbox' \
  --change 'CMD ["sleep", "infinity"]' \
  "$tmp/rootfs.tar" "$image" >/dev/null
echo "build-rootfs: built $image"
