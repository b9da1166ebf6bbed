#!/bin/sh
# Regenerates e2e/autogen/testdata from e2e/autogen/scenarios by running
# AutoGen AgentChat 0.7.5 (see README.md; build the environment with env.sh).
set -eu
cd "$(dirname "$0")"
env_dir=${AUTOGEN_ENV:-/work/autogen-env}
if [ ! -x "$env_dir/python.sh" ]; then
	echo "no AgentChat environment in $env_dir: run e2e/autogen/env.sh AUTOGEN_GIT_DIR first" >&2
	exit 1
fi
# tiktoken's encodings for token-limited contexts, from agentd's own
# embedded files (the recorder has no network).
(cd ../.. && go run ./e2e/autogen/tiktokencache e2e/autogen/.tiktoken-cache)
rm -f testdata/*.json
# The team-file scenarios are teams AgentChat builds and dumps itself.
"$env_dir/python.sh" teams.py scenarios
"$env_dir/python.sh" record.py scenarios/*.json testdata
"$env_dir/python.sh" structured.py structured-pydantic.json
mv structured-pydantic.json ../../internal/structured/testdata/pydantic.json
