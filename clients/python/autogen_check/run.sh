#!/bin/sh
# Runs RemoteTeam under AutoGen AgentChat 0.7.5 (the environment of
# e2e/autogen/README.md) against the in-process recordings in
# tests/testdata/agentchat. With RECORD=1 it records them again first.
#
#   clients/python/autogen_check/run.sh AGENTD_BINARY
#
# The environment runs python3 under bubblewrap with the current directory as
# its only writable place and loopback only, so the agentd binary is copied
# into clients/python/.autogen-run and started inside the same sandbox, next
# to the scripted model server.
set -eu
bin=${1:?usage: run.sh AGENTD_BINARY}
env_dir=${AUTOGEN_ENV:-/work/autogen-env}
if [ ! -x "$env_dir/python.sh" ]; then
	echo "no AgentChat environment in $env_dir: run e2e/autogen/env.sh AUTOGEN_GIT_DIR first" >&2
	exit 1
fi
cd "$(dirname "$0")/.."
mkdir -p .autogen-run
cp "$bin" .autogen-run/agentd
if [ "${RECORD:-}" = 1 ]; then
	"$env_dir/python.sh" autogen_check/record.py
fi
"$env_dir/python.sh" autogen_check/check.py .autogen-run/agentd
