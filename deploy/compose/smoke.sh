#!/usr/bin/env bash
# make compose-smoke: docker-compose.yml started for real. Builds the intake
# image and the nats/postgres stand-ins (deploy/images: no registry is
# reachable here; INTAKE_SMOKE_UPSTREAM=1 uses the official images instead),
# brings the stack up with random secrets on loopback ports of the host's
# network (smoke.override.yaml), waits for every service's healthcheck,
# restarts ingress while NATS is down and waits for it to recover, sends a
# signed webhook to ingress twice, and waits for the replayer's API to show
# it processed once with two deliveries. It always tears the stack down,
# volumes and the images it built included, and stops a dockerd it started.
# No engine that can be reached or started: a message and exit 0, or exit 1
# with INTAKE_SMOKE_REQUIRE_ENGINE=1 (CI sets it).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=deploy/compose
DOCKER=${DOCKER:-docker}
export DOCKER
start=$(date +%s)
log() { echo "compose-smoke [$(( $(date +%s) - start ))s]: $*"; }

# Stop at the end only a dockerd started here (CI starts and stops its
# own); engine.sh keeps this run's dockerd apart from any other's.
made_state=0
if [ -z "${INTAKE_ENGINE_STATE:-}" ]; then
  INTAKE_ENGINE_STATE=$(mktemp -d "${TMPDIR:-/tmp}/intake-smoke-engine.XXXXXX")
  made_state=1
fi
state=$INTAKE_ENGINE_STATE
export INTAKE_ENGINE_STATE
ours=0
[ -f "$state/dockerd.pid" ] || ours=1
set +e
$here/engine.sh ensure
rc=$?
set -e
if [ $rc -ne 0 ]; then
  [ $made_state = 1 ] && rm -rf "$state"
  if [ "${INTAKE_SMOKE_REQUIRE_ENGINE:-}" = 1 ]; then
    log "FAILED: no container engine could be reached or started (see above), and INTAKE_SMOKE_REQUIRE_ENGINE=1"
    exit 1
  fi
  log "SKIPPED: no container engine could be reached or started (see above); nothing was tested"
  exit 0
fi
[ -f "$state/dockerd.pid" ] || ours=0
engine_host=$($here/engine.sh host)
if [ -n "$engine_host" ]; then export DOCKER_HOST=$engine_host; fi
built=()   # images built here, removed at the end
remove_images() {
  if [ ${#built[@]} -gt 0 ]; then $DOCKER rmi "${built[@]}" >/dev/null 2>&1 || log "could not remove the images ${built[*]}"; fi
}
stop_engine() {
  if [ $ours = 1 ]; then
    if $here/engine.sh stop; then
      if [ $made_state = 1 ]; then rm -rf "$state"; fi
    else
      log "the dockerd started here did not stop (see above; state in $state)"
    fi
  fi
}
cleanup() { remove_images; stop_engine; }
trap cleanup EXIT
read -r -a compose_tool <<<"$($here/engine.sh compose)"
log "engine: $($DOCKER version --format '{{.Server.Version}}' 2>/dev/null), compose: ${compose_tool[*]} $("${compose_tool[@]}" version --short 2>/dev/null || true)"

# ---- images
export INTAKE_IMAGE=${INTAKE_IMAGE:-intake:smoke}
make --no-print-directory image IMAGE="$INTAKE_IMAGE" >/dev/null
built+=("$INTAKE_IMAGE")
if [ "${INTAKE_SMOKE_UPSTREAM:-}" != 1 ]; then
  nats_version=$(${GO:-go} list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)
  pg_major=$(basename "$(dirname "$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)")")
  export INTAKE_NATS_IMAGE=${INTAKE_NATS_IMAGE:-intake-standin/nats:${nats_version#v}}
  export INTAKE_POSTGRES_IMAGE=${INTAKE_POSTGRES_IMAGE:-intake-standin/postgres:$pg_major}
  built+=("$INTAKE_NATS_IMAGE" "$INTAKE_POSTGRES_IMAGE")
  deploy/images/build.sh
fi
log "images: $INTAKE_IMAGE, ${INTAKE_NATS_IMAGE:-nats (compose default)}, ${INTAKE_POSTGRES_IMAGE:-postgres (compose default)}"

# ---- random secrets and free loopback ports
hex() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }
export POSTGRES_PASSWORD=$(hex 16) INTAKE_OPERATOR_TOKEN=$(hex 32) INTAKE_PARTNER_SECRET=$(hex 32) INTAKE_ENVELOPE_KEY=$(hex 32)
export INTAKE_DEMO_SECRET=whsec_$(head -c 32 /dev/urandom | base64 | tr -d '\n')
for u in ADMIN INGRESS PROCESSOR REPLAYER DISPATCHER SUBSCRIBER; do export "INTAKE_NATS_${u}_PASSWORD=$(hex 16)"; done
free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
names=(NATS NATS_MONITOR PG INGRESS INGRESS_INTERNAL PROCESSOR PROCESSOR_INTERNAL REPLAYER REPLAYER_INTERNAL DISPATCHER DISPATCHER_INTERNAL)
for _ in $(seq 1 20); do
  base=$(( 20000 + RANDOM % 12000 )) ok=1   # below Linux's ephemeral ports (32768-)
  for i in "${!names[@]}"; do free $((base + i)) || ok=0; done
  [ $ok = 1 ] && break
done
[ $ok = 1 ] || { log "FAILED: no run of ${#names[@]} free loopback ports"; exit 1; }
for i in "${!names[@]}"; do export "SMOKE_${names[$i]}_PORT=$((base + i))"; done
log "ports 127.0.0.1:$base-$((base + ${#names[@]} - 1)) (ingress $SMOKE_INGRESS_PORT, replayer API $SMOKE_REPLAYER_PORT)"

project=intake-smoke-$$
# docker-compose.yml + smoke.override.yaml, without the published ports: a
# container in the host's network has none to publish (docker-compose v1
# refuses the pair, and an override cannot remove list items there). Not
# interpolated: the secrets stay in the environment, not in the file.
mkdir -p bin
stack=bin/compose-smoke-$$.yaml
"${compose_tool[@]}" --project-directory . -f docker-compose.yml -f $here/smoke.override.yaml config --no-interpolate |
  awk '/^    ports:/ {skip = 1; next} skip && /^    - |^     / {next} {skip = 0; print}' >"$stack"
compose() { "${compose_tool[@]}" -p "$project" --project-directory . -f "$stack" "$@"; }
status=1
teardown() {
  if [ $status -ne 0 ]; then
    log "FAILED; the services' state and logs:"
    compose ps || true
    compose logs --no-color --tail 40 || true
  fi
  compose down -v --remove-orphans --timeout 20 >/dev/null 2>&1 || compose down -v --remove-orphans || true
  rm -f "$stack"
  remove_images
  log "torn down (containers, network, volumes, images ${built[*]})"
  built=()
  stop_engine
}
trap teardown EXIT

# ---- up: compose starts each service once its dependencies are healthy
# (migrate: exited 0); then every long-running service must turn healthy.
log "up"
compose up -d 2>&1 | sed 's/^/  /'
healthy() {
  for s in nats postgres ingress processor replayer dispatcher; do
    id=$(compose ps -q "$s")
    [ -n "$id" ] && [ "$($DOCKER inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{end}}' "$id")" = healthy ] || return 1
  done
}
deadline=$(( $(date +%s) + ${SMOKE_TIMEOUT:-180} ))
until healthy; do
  if [ "$(date +%s)" -ge "$deadline" ]; then log "FAILED: services not healthy in ${SMOKE_TIMEOUT:-180}s"; exit 1; fi
  sleep 2
done
migrate=$($DOCKER inspect -f '{{.State.ExitCode}}' "$(compose ps -q migrate)")
[ "$migrate" = 0 ] || { log "FAILED: migrate exited $migrate"; exit 1; }
log "healthy: nats postgres ingress processor replayer dispatcher (migrate exited 0)"

# ---- NATS not listening when ingress starts (the issue compose had: ingress
# exited at once): ingress must wait for it (up to 30 s) or be restarted by
# its policy, and turn healthy again.
log "outage: nats stopped, ingress restarted without it, nats back after 5s"
$DOCKER stop -t 10 "$(compose ps -q nats)" >/dev/null
$DOCKER restart -t 10 "$(compose ps -q ingress)" >/dev/null
sleep 5
$DOCKER start "$(compose ps -q nats)" >/dev/null
sleep 2   # let the health status catch up with the restarts
deadline=$(( $(date +%s) + ${SMOKE_TIMEOUT:-180} ))
until healthy; do
  if [ "$(date +%s)" -ge "$deadline" ]; then log "FAILED: not healthy again after the NATS outage"; exit 1; fi
  sleep 2
done
log "healthy again after the outage (ingress restarts: $($DOCKER inspect -f '{{.RestartCount}}' "$(compose ps -q ingress)"))"

# ---- a signed webhook, twice, from inside the ingress container (`intake
# send` reads its config there and signs with the integration's secret as
# Standard Webhooks senders do). `docker exec`, not `compose run`: compose v1
# links a run container to its dependencies, which host networking refuses.
in_container() { svc=$1; shift; $DOCKER exec "$@" "$(compose ps -q "$svc")" /usr/local/bin/intake "${cmd[@]}"; }
id=smoke_$(hex 6)
for want in accepted duplicate; do
  cmd=(send --config /etc/intake/intake.yaml \
    --integration demo --id "$id" --url "http://127.0.0.1:$SMOKE_INGRESS_PORT")
  out=$(in_container ingress 2>&1) ||
    { log "FAILED: intake send: $out"; exit 1; }
  case "$out" in *"\"status\":\"$want\""*) ;; *) log "FAILED: ingress answered $out, want $want"; exit 1 ;; esac
  log "ingress: $(echo "$out" | grep -o "^[0-9][0-9][0-9] .*\"status\".*}")"
done

# ---- processed? The replayer's operator API, through `intake events show`.
deadline=$(( $(date +%s) + 60 ))
while :; do
  cmd=(events show "demo/main/$id" --server "http://127.0.0.1:$SMOKE_REPLAYER_PORT" -o json)
  ev=$(INTAKE_TOKEN=$INTAKE_OPERATOR_TOKEN in_container replayer -e INTAKE_TOKEN 2>&1 || true)
  compact=$(echo "$ev" | tr -d ' \n')
  case "$compact" in
    *'"status":"processed"'*'"delivery_count":2'*|*'"delivery_count":2'*'"status":"processed"'*) break ;;
  esac
  if [ "$(date +%s)" -ge "$deadline" ]; then log "FAILED: demo/main/$id not processed with 2 deliveries in 60s: $ev"; exit 1; fi
  sleep 2
done
log "processor: demo/main/$id processed, delivery_count 2 (GET /api/v1/events/demo/$id)"
status=0
log "PASSED in $(( $(date +%s) - start ))s"
