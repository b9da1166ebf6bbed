#!/usr/bin/env bash
# Checks the one-command path of the README: deploy/image/run.sh, as a
# newcomer runs it (on a spare port and a throwaway volume here), serves the
# console and the API on loopback and runs the debate example to its end;
# then it is stopped with SIGTERM as Ctrl-C would. CI runs it after the
# images are built. Needs curl and python3.
#
# usage: deploy/image/smoke.sh   env: AGENTD_PORT (18181), ENGINE, AGENTD_IMAGE
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=/dev/null
. "$root/deploy/lib/image.sh"
engine=$(image_engine)
port=${AGENTD_PORT:-18181}
volume=agentd-image-smoke-$$
base=http://127.0.0.1:$port
log=$(mktemp /tmp/agentd-image-smoke.XXXXXX)

# run.sh builds a missing image first; that is a build's time, not a start's.
image=${AGENTD_IMAGE:-localhost/agentd:local}
"$engine" image inspect "$image" >/dev/null 2>&1 || "$root/deploy/image/build.sh" "$image"

AGENTD_ADDR=127.0.0.1:$port AGENTD_VOLUME=$volume "$root/deploy/image/run.sh" >"$log" 2>&1 &
pid=$!
stop() {
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  "$engine" volume rm -f "$volume" >/dev/null 2>&1 || true
  rm -f "$log"
}
fail() {
  echo "image smoke: $*" >&2
  echo "--- output of deploy/image/run.sh" >&2
  tail -n 40 "$log" >&2
  exit 1
}
trap stop EXIT

for _ in $(seq 120); do
  curl -fsS "$base/readyz" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || fail "run.sh exited before agentd was ready"
  sleep 1
done
curl -fsS "$base/readyz" >/dev/null || fail "agentd did not get ready on $base"
# Read the whole page before looking in it: grep -q stops reading at the
# first match, and curl, cut off, fails the pipeline.
page=$(curl -fsS "$base/") || fail "GET / failed"
grep -q '<title>agentd' <<<"$page" || fail "GET / is not the console"

chat=$(curl -fsS -X POST "$base/v1/chats?wait_s=60" -H 'Content-Type: application/json' \
  --data @"$root/examples/debate.json") || fail "create the debate"
echo "$chat" | python3 -c '
import json, sys
c = json.load(sys.stdin)
assert c["status"] == "completed" and c["stop_reason"] == "text_mention", c
print("image smoke: the debate ran in", c["id"], "-", c["stop_detail"])
' || fail "the debate did not complete: $chat"
"$engine" run --rm "$image" version
echo "image smoke: ok"
