#!/bin/sh
# Regenerates e2e/swarm/testdata from e2e/swarm/scenarios by running OpenAI
# Swarm's own run loop (see README.md; build the environment with env.sh).
set -eu
cd "$(dirname "$0")"
env_dir=${SWARM_ENV:-/work/swarm-env}
if [ ! -x "$env_dir/python.sh" ]; then
	echo "no Swarm environment in $env_dir: run e2e/swarm/env.sh SWARM_GIT_DIR first" >&2
	exit 1
fi
rm -f testdata/*.json
"$env_dir/python.sh" record.py scenarios/*.json testdata
# function_to_json over more signatures, for internal/pyfunc's tests.
"$env_dir/python.sh" functions.py swarm-schemas.json
mv swarm-schemas.json ../../internal/pyfunc/testdata/swarm_schemas.json
