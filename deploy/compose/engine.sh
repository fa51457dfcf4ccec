#!/usr/bin/env bash
# The container engine for `make compose-smoke` and CI.
#   engine.sh ensure   reachable engine and a compose tool, or exit 3 saying why:
#                      installs Debian's docker.io and docker-compose when
#                      missing (as root), starts dockerd when it is not running
#   engine.sh stop     stops the dockerd `ensure` started (and only that one)
#   engine.sh compose  prints the compose command to use
# dockerd runs with --bridge=none --iptables=false --ip6tables=false: no
# bridge, no NAT rules on a shared machine; containers use the host's network
# (deploy/compose/smoke.override.yaml puts everything on 127.0.0.1).
set -uo pipefail
DOCKER=${DOCKER:-docker}
state=${INTAKE_ENGINE_STATE:-${TMPDIR:-/tmp}/intake-dockerd}   # pid and log of a dockerd we started

compose_cmd() {
  if $DOCKER compose version >/dev/null 2>&1; then echo "$DOCKER compose"
  elif command -v docker-compose >/dev/null 2>&1; then echo docker-compose
  else return 1
  fi
}

apt_install() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 1
  echo "engine: installing Debian's $* (apt-get)" >&2
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

ensure() {
  if ! command -v "$DOCKER" >/dev/null 2>&1 || { ! $DOCKER info >/dev/null 2>&1 && ! command -v dockerd >/dev/null 2>&1; }; then
    apt_install docker.io || { echo "engine: no docker client or dockerd, and Debian's docker.io could not be installed (not root, or no apt-get)" >&2; return 3; }
  fi
  if ! compose_cmd >/dev/null; then
    apt_install docker-compose || { echo "engine: no compose tool (docker compose plugin or docker-compose), and Debian's docker-compose could not be installed" >&2; return 3; }
  fi
  if $DOCKER info >/dev/null 2>&1; then return 0; fi
  if [ "$(id -u)" != 0 ]; then
    echo "engine: dockerd is not running and starting it needs root" >&2; return 3
  fi
  echo "engine: starting dockerd --bridge=none --iptables=false --ip6tables=false (log: $state.log)" >&2
  dockerd --bridge=none --iptables=false --ip6tables=false >"$state.log" 2>&1 &
  echo $! >"$state.pid"
  for _ in $(seq 1 60); do
    if $DOCKER info >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$(cat "$state.pid")" 2>/dev/null; then break; fi
    sleep 1
  done
  echo "engine: dockerd did not come up; the end of its log:" >&2
  tail -n 20 "$state.log" >&2
  stop
  return 3
}

stop() {
  [ -f "$state.pid" ] || return 0
  pid=$(cat "$state.pid")
  if kill -0 "$pid" 2>/dev/null; then
    echo "engine: stopping the dockerd we started (pid $pid)" >&2
    kill "$pid"
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  fi
  rm -f "$state.pid"
}

case "${1:-}" in
  ensure) ensure ;;
  stop) stop ;;
  compose) compose_cmd ;;
  *) echo "usage: $0 ensure|stop|compose" >&2; exit 2 ;;
esac
