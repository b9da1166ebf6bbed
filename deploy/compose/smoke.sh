#!/usr/bin/env bash
# Brings the compose stack up with the images build-images.sh made (no
# registry), runs a chat through the load balancer, streams it with the npm
# eventsource client (e2e/js), asks Prometheus's HTTP API for the chat's
# messages, and takes the stack down. CI runs it; it needs podman-compose,
# node with e2e/js/node_modules, curl and python3.
#
# usage: deploy/compose/smoke.sh   env: AGENTD_PORT (18080), PROMETHEUS_PORT (19090)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root/deploy/compose"
export AGENTD_IMAGE=localhost/agentd:local HAPROXY_IMAGE=localhost/agentd-haproxy:local
export PROMETHEUS_IMAGE=localhost/agentd-prometheus:local POSTGRES_IMAGE=localhost/agentd-postgres-test:latest
# The test Postgres image has only the postgres user, with trust auth.
export POSTGRES_USER=postgres POSTGRES_DB=postgres
export AGENTD_PORT=${AGENTD_PORT:-18080} PROMETHEUS_PORT=${PROMETHEUS_PORT:-19090}
export AGENTD_API_KEY=smoke-test-key-0123456789
project=agentd-smoke
compose=(podman-compose -p "$project" -f compose.yaml)
lb=http://127.0.0.1:$AGENTD_PORT
prom=http://127.0.0.1:$PROMETHEUS_PORT
auth=(-H "Authorization: Bearer $AGENTD_API_KEY")

down() {
  if [ -n "${failed:-}" ]; then
    for s in agentd-1 lb prometheus postgres; do
      echo "--- logs of $s"; podman logs --tail 30 "${project}_${s}_1" 2>&1 || true
    done
  fi
  "${compose[@]}" down -v >/dev/null 2>&1 || true
  # podman-compose 1.0 leaves the project's network behind.
  podman network rm -f "${project}_default" >/dev/null 2>&1 || true
}
trap 'failed=1; down' ERR
trap down EXIT

# podman-compose 1.0 knows no profiles: name the services (Grafana, which
# has no Debian package, stays out).
"${compose[@]}" up -d postgres agentd-1 agentd-2 agentd-3 lb prometheus >/dev/null
echo "smoke: stack up; waiting for the load balancer"
for _ in $(seq 120); do
  curl -fsS "$lb/readyz" >/dev/null 2>&1 && break
  sleep 1
done
curl -fsS "$lb/readyz"
echo

spec='{"task": "count", "max_round": 6,
  "agents": [{"name": "a", "type": "assistant", "model": "ma"}, {"name": "b", "type": "assistant", "model": "mb"}],
  "models": {"ma": {"provider": "replay", "responses": [{"content": "a-0", "delay_ms": 300}, {"content": "a-1", "delay_ms": 300}, {"content": "a-2", "delay_ms": 300}]},
             "mb": {"provider": "replay", "responses": [{"content": "b-0", "delay_ms": 300}, {"content": "b-1", "delay_ms": 300}, {"content": "b-2", "delay_ms": 300}]}}}'
id=$(curl -fsS "${auth[@]}" -H 'Content-Type: application/json' -H 'Idempotency-Key: smoke-1' \
  --data "$spec" "$lb/v1/chats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
echo "smoke: chat $id created through the load balancer"

events=$(timeout 120 node "$root/e2e/js/follow.mjs" "$lb/v1/chats/$id/events" "$AGENTD_API_KEY")
echo "$events" | python3 -c '
import json, sys
evs = [json.loads(l) for l in sys.stdin if l.strip()]
ids = [e["id"] for e in evs if "id" in e]
assert ids == list(range(1, len(ids) + 1)), ids
assert evs[-1].get("type") == "chat.completed", evs[-1]
print("smoke: streamed %d events with eventsource, ending in chat.completed" % len(ids))'

# The scrape interval is 5 s: wait for the messages to show in Prometheus.
for _ in $(seq 60); do
  n=$(curl -fsS "$prom/api/v1/query" --data-urlencode 'query=sum(agentd_messages_appended_total)' |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(int(float(r[0]["value"][1])) if r else 0)')
  [ "$n" -ge 6 ] && break
  sleep 2
done
echo "smoke: Prometheus reports $n messages appended"
[ "$n" -ge 6 ]
up=$(curl -fsS "$prom/api/v1/query" --data-urlencode 'query=sum(agentd_store_up)' |
  python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(int(float(r[0]["value"][1])) if r else 0)')
echo "smoke: $up replicas report the store up"
[ "$up" -eq 3 ]
echo "smoke: ok"
