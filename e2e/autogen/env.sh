#!/bin/sh
# Builds the environment the recorder runs AutoGen AgentChat in, without PyPI:
# a Debian trixie root (Python 3.13 and AgentChat's dependencies as Debian
# packages) and AutoGen's source at tag python-v0.7.5.
#
#   e2e/autogen/env.sh AUTOGEN_GIT_DIR [JSON_SCHEMA_TO_PYDANTIC_GIT_DIR]
#
# AUTOGEN_GIT_DIR is a git directory of github.com/microsoft/autogen (a clone
# or bare mirror that has the tag). The optional second one, of
# github.com/richard-gyiko/json-schema-to-pydantic, gives HttpTool the
# package it imports (v0.4.1, the release AgentChat 0.7.5 came out with;
# later ones need a newer pydantic than Debian's), for
# e2e/autogen/components/httptool.py. Output goes to $AUTOGEN_ENV (default
# /work/autogen-env): root/ (the Debian tree), src/ (the three packages'
# sources), site/ (package metadata and stubs, see README.md).
set -eu
git_dir=${1:?usage: env.sh AUTOGEN_GIT_DIR}
env_dir=${AUTOGEN_ENV:-/work/autogen-env}
tag=python-v0.7.5
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
here=$(cd "$(dirname "$0")" && pwd)

mkdir -p "$env_dir"
if [ ! -x "$env_dir/root/usr/bin/python3" ]; then
	rm -rf "$env_dir/root"
	# opentelemetry-api (>= 1.34, which AutoGen's tracing imports) is only in
	# sid; everything else comes from trixie.
	mmdebstrap --variant=essential \
		--aptopt='APT::Default-Release "trixie"' --aptopt='Acquire::Check-Valid-Until "false"' \
		--include=python3,python3-pydantic,python3-openai,python3-protobuf,python3-pil,python3-tiktoken,python3-typing-extensions,python3-opentelemetry-api/sid \
		trixie "$env_dir/root" "deb $mirror trixie main" "deb $mirror sid main"
fi

rm -rf "$env_dir/src"
mkdir -p "$env_dir/src"
git --git-dir="$git_dir" archive "$tag:python/packages" \
	autogen-core/src autogen-agentchat/src autogen-ext/src 2>/dev/null |
	tar -x -C "$env_dir/src" || true
test -f "$env_dir/src/autogen-agentchat/src/autogen_agentchat/__init__.py"
git --git-dir="$git_dir" rev-parse "$tag^{commit}" >"$env_dir/src/COMMIT"

# AutoGen reads its own version with importlib.metadata; a source checkout has
# no installed metadata, so give each package a minimal dist-info.
rm -rf "$env_dir/site"
mkdir -p "$env_dir/site"
for p in autogen_core autogen_agentchat autogen_ext; do
	d="$env_dir/site/$p-0.7.5.dist-info"
	mkdir -p "$d"
	printf 'Metadata-Version: 2.1\nName: %s\nVersion: 0.7.5\n' "$p" >"$d/METADATA"
done
cp -r "$here/stubs/." "$env_dir/site/"
if [ -n "${2:-}" ]; then
	git --git-dir="$2" archive v0.4.1:src json_schema_to_pydantic | tar -x -C "$env_dir/site"
fi

cp "$here/python.sh" "$env_dir/python.sh"
"$env_dir/python.sh" -c 'import autogen_agentchat, autogen_ext.models.openai; print("AgentChat", autogen_agentchat.__version__)'
echo "$env_dir/python.sh SCRIPT.py [ARGS...]   # run from the directory holding SCRIPT.py: it is the working directory (writable) inside; AgentChat 0.7.5 from source, bubblewrap, loopback only" >"$env_dir/READY"
