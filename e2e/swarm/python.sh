#!/bin/sh
# Runs python3 with OpenAI Swarm (from source) in the environment that
# env.sh built, under bubblewrap: the Debian root read-only, no network but
# a private loopback, the current directory writable as /tmp/cwd.
#
#   e2e/swarm/python.sh [python3 arguments...]
set -eu
env_dir=${SWARM_ENV:-/work/swarm-env}

exec bwrap \
	--ro-bind "$env_dir/root" / \
	--tmpfs /opt \
	--ro-bind "$env_dir/src" /opt/swarm \
	--proc /proc --dev /dev --tmpfs /tmp \
	--bind "$(pwd)" /tmp/cwd \
	--chdir /tmp/cwd \
	--unshare-all --die-with-parent --new-session \
	--clearenv \
	--setenv PATH /usr/bin:/bin \
	--setenv HOME /tmp \
	--setenv PYTHONDONTWRITEBYTECODE 1 \
	--setenv PYTHONHASHSEED 0 \
	--setenv PYTHONPATH /opt/swarm \
	python3 "$@"
