#!/bin/sh
# Copies AutoGen Studio's default gallery (the team files a new AutoGen Studio
# user starts from) out of an AutoGen git directory at tag python-v0.7.5 into
# internal/component/testdata/gallery/, unchanged. e2e/gallery_test.go runs
# its teams on agentd.
#
#   e2e/autogen/components/gallery.sh AUTOGEN_GIT_DIR
set -eu
git_dir=$1
tag=python-v0.7.5
src=python/packages/autogen-studio/frontend/src/components/views/gallery/default_gallery.json
out=$(dirname "$0")/../../../internal/component/testdata/gallery
mkdir -p "$out"
git --git-dir "$git_dir" show "$tag:$src" >"$out/default_gallery.json"
echo "$tag $(git --git-dir "$git_dir" rev-parse "$tag^{commit}") $src" >"$out/SOURCE"
