#!/bin/sh
# Builds the environment the recorder runs OpenAI Swarm in, without PyPI: a
# Debian trixie root with Python 3.13 and Swarm's two dependencies (openai,
# pydantic) as Debian packages, and Swarm's source at a pinned commit.
#
#   e2e/swarm/env.sh SWARM_GIT_DIR
#
# SWARM_GIT_DIR is a git directory of github.com/openai/swarm (a clone or
# bare mirror that has the commit below). Output goes to $SWARM_ENV
# (default /work/swarm-env): root/ (the Debian tree), src/ (Swarm's
# package, src/COMMIT its commit).
set -eu
git_dir=${1:?usage: env.sh SWARM_GIT_DIR}
env_dir=${SWARM_ENV:-/work/swarm-env}
commit=6af0b4caf37dca4526dfd98e9fbd8ce36e7eeb22
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
here=$(cd "$(dirname "$0")" && pwd)

mkdir -p "$env_dir"
if [ ! -x "$env_dir/root/usr/bin/python3" ]; then
	rm -rf "$env_dir/root"
	mmdebstrap --variant=essential --aptopt='Acquire::Check-Valid-Until "false"' \
		--include=python3,python3-pydantic,python3-openai \
		trixie "$env_dir/root" "deb $mirror trixie main"
fi

rm -rf "$env_dir/src"
mkdir -p "$env_dir/src"
git --git-dir="$git_dir" archive "$commit" swarm | tar -x -C "$env_dir/src"
test -f "$env_dir/src/swarm/core.py"
echo "$commit" >"$env_dir/src/COMMIT"

cp "$here/python.sh" "$env_dir/python.sh"
"$env_dir/python.sh" -c 'import swarm, openai, pydantic; print("Swarm with openai", openai.__version__, "pydantic", pydantic.__version__)'
echo "$env_dir/python.sh SCRIPT.py [ARGS...]   # run from the directory holding SCRIPT.py: it is the working directory (writable) inside; Swarm from source, bubblewrap, loopback only" >"$env_dir/READY"
