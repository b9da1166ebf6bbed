#!/bin/sh
# Runs python3 with AutoGen AgentChat 0.7.5 (from source) in the environment
# that env.sh built, under bubblewrap: the Debian root read-only, no network
# but a private loopback, the current directory writable as /tmp/cwd.
#
#   e2e/autogen/python.sh [python3 arguments...]
set -eu
env_dir=${AUTOGEN_ENV:-/work/autogen-env}

exec bwrap \
	--ro-bind "$env_dir/root" / \
	--tmpfs /opt \
	--ro-bind "$env_dir/src" /opt/autogen/src \
	--ro-bind "$env_dir/site" /opt/autogen/site \
	--proc /proc --dev /dev --tmpfs /tmp \
	--bind "$(pwd)" /tmp/cwd \
	--chdir /tmp/cwd \
	--unshare-all --die-with-parent --new-session \
	--clearenv \
	--setenv PATH /usr/bin:/bin \
	--setenv HOME /tmp \
	--setenv PYTHONDONTWRITEBYTECODE 1 \
	--setenv PYTHONHASHSEED 0 \
	--setenv PYTHONPATH /opt/autogen/site:/opt/autogen/src/autogen-core/src:/opt/autogen/src/autogen-agentchat/src:/opt/autogen/src/autogen-ext/src \
	python3 "$@"
