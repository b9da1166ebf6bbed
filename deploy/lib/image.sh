# Sourced by the scripts that build images without a registry, from a Debian
# rootfs made by mmdebstrap and imported into Podman or Docker
# (deploy/image/build.sh, deploy/sandbox/build-rootfs.sh,
# deploy/compose/build-images.sh, internal/store/pgtest/build-image.sh).
# Each image is what its script's customize hooks and import changes make it;
# the rootfs underneath is built the same way for all of them, here.
#
# env: MIRROR (default: the mirror apt uses here), SUITE (bookworm),
#      ENGINE (podman or docker; default podman when installed)

# shellcheck source=/dev/null
. "$(dirname "${BASH_SOURCE[0]}")/debian-mirror.sh"

# image_engine prints the container engine to import images into.
image_engine() {
  echo "${ENGINE:-$(command -v podman >/dev/null && echo podman || echo docker)}"
}

# need_mmdebstrap fails, saying how to install it, when mmdebstrap is missing
# (check before any long step).
need_mmdebstrap() {
  command -v mmdebstrap >/dev/null && return
  echo "$(basename "$0"): mmdebstrap is not installed (apt-get install mmdebstrap)" >&2
  return 1
}

# debian_rootfs PACKAGES TAR [mmdebstrap options...] writes to TAR a Debian
# rootfs of the essential set plus PACKAGES (comma-separated), without
# documentation (copyright files excepted), man pages, locales and apt's
# caches; the options (customize hooks) run before that clean-up.
debian_rootfs() {
  local packages=$1 tar=$2
  shift 2
  need_mmdebstrap
  mmdebstrap --variant=essential --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    "$@" --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
    "${SUITE:-bookworm}" "$tar" "$(debian_mirror)"
}
