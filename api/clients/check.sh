#!/usr/bin/env bash
# Generates the TypeScript (openapi-typescript + openapi-fetch) and Go
# (oapi-codegen) clients from api/openapi.yaml with default flags, compiles
# them, lints the document with Redocly's recommended ruleset, and runs a
# small program with each client against a real agentd.
#
#   api/clients/check.sh path/to/agentd
#
# Everything is generated and installed into a temp dir, removed on exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$(realpath "${1:?usage: check.sh path/to/agentd}")
spec="$root/api/openapi.yaml"
oapi_codegen=github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2

work=$(mktemp -d "${TMPDIR:-/tmp}/agentd-clients.XXXXXX")
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== npm packages (pinned) into $work/ts"
mkdir -p "$work/ts"
cp "$here/ts/package.json" "$here/ts/package-lock.json" "$here/ts/tsconfig.json" "$here/ts/main.ts" "$work/ts/"
(cd "$work/ts" && npm ci --no-audit --no-fund --loglevel=error)

echo "== redocly lint (recommended)"
(cd "$work/ts" && npx --no-install redocly lint --extends recommended "$spec")

echo "== openapi-typescript, tsc"
(cd "$work/ts" && npx --no-install openapi-typescript "$spec" -o schema.d.ts && npx --no-install tsc -p .)

echo "== oapi-codegen, go build"
cp -r "$here/go" "$work/go"
rm -rf "$work/go/agentd"
(cd "$work/go" && go run "$oapi_codegen" -package agentd -o agentd/agentd.gen.go "$spec" && go vet . && go build -o check .)

echo "== agentd"
AGENTD_ADDR=127.0.0.1:0 AGENTD_DATA_DIR="$work/data" AGENTD_SANDBOX=none "$bin" >"$work/agentd.log" 2>&1 &
pid=$!
addr=
for _ in $(seq 300); do
  addr=$(sed -n 's/.*msg="agentd serving" addr=\([^ ]*\).*/\1/p' "$work/agentd.log")
  [ -n "$addr" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/agentd.log"; exit 1; }
  sleep 0.1
done
[ -n "$addr" ] || { echo "agentd did not start"; cat "$work/agentd.log"; exit 1; }
export AGENTD_URL="http://$addr"

echo "== the TypeScript program against $AGENTD_URL"
(cd "$work/ts" && node dist/main.js "$root/examples/debate.json")
echo "== the Go program against $AGENTD_URL"
(cd "$work/go" && ./check "$root/examples/debate.json")
