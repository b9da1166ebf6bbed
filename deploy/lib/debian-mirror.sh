# Sourced by deploy/lib/image.sh, which the scripts that build images from a
# Debian rootfs with mmdebstrap source.
#
# debian_mirror prints $MIRROR if set, else the mirror apt already uses here
# (deb822 sources first, then sources.list), else deb.debian.org.
debian_mirror() {
  if [ -n "${MIRROR:-}" ]; then
    echo "$MIRROR"
    return
  fi
  local m
  m=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -v security | head -n 1 || true)
  if [ -z "$m" ]; then
    m=$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  fi
  echo "${m:-http://deb.debian.org/debian}"
}
