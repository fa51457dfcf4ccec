#!/usr/bin/env bash
# The container engine for `make compose-smoke` and CI.
#   engine.sh ensure   reachable engine and a compose tool, or exit 3 saying why:
#                      installs Debian's docker.io and docker-compose when
#                      missing (as root), starts a dockerd of this run's own
#                      when none is reachable
#   engine.sh stop     stops the dockerd `ensure` started in this run's state
#                      (and only that one); exit 1 if it would not stop
#   engine.sh host     prints the DOCKER_HOST to use: this run's dockerd's
#                      socket, or nothing (the engine that was reachable)
#   engine.sh compose  prints the compose command to use
#
# Per-run state: INTAKE_ENGINE_STATE, a directory of this run's (mktemp -d;
# .ci/run and smoke.sh export it for ensure, stop and host). A dockerd started here keeps everything in it: PID file,
# socket, exec root, data root (images, containers, volumes) and log, so two
# runs on one machine never adopt or kill each other's dockerd, and stop
# removes the data root with it. ensure and stop hold a flock on
# STATE/lock. dockerd runs with --bridge=none --iptables=false
# --ip6tables=false: no bridge, no NAT rules on a shared machine; containers
# use the host's network (deploy/compose/smoke.override.yaml puts everything
# on 127.0.0.1). The state directory must be on a filesystem overlay2 can
# use (ext4, xfs).
set -uo pipefail
DOCKER=${DOCKER:-docker}
state=${INTAKE_ENGINE_STATE:-}
case "${1:-}" in
  ensure|stop|host)
    if [ -z "$state" ]; then
      echo "engine: set INTAKE_ENGINE_STATE to this run's state directory (mktemp -d), the same for ensure and stop" >&2
      exit 2
    fi
    mkdir -p "$state" || exit 3 ;;
esac
pidfile=$state/dockerd.pid
sock=$state/docker.sock

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

# ours PID: PID is a dockerd running on this run's data root (a PID file can
# outlive its process, and the number be reused by another).
ours() {
  local cmdline
  cmdline=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  case "$cmdline" in
    *dockerd*"--data-root $state/data-root"*) return 0 ;;
    *) return 1 ;;
  esac
}

ensure() {
  if [ -f "$pidfile" ] && ours "$(cat "$pidfile")" && DOCKER_HOST=unix://$sock $DOCKER info >/dev/null 2>&1; then
    return 0 # started by an earlier ensure of this run
  fi
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
  if [ -f "$pidfile" ]; then
    echo "engine: $pidfile names no dockerd of this state (pid $(cat "$pidfile")); starting a new one" >&2
    rm -f "$pidfile"
  fi
  echo "engine: starting dockerd --bridge=none --iptables=false --ip6tables=false in $state (log: $state/dockerd.log)" >&2
  mkdir -p "$state/data-root" "$state/exec-root"
  dockerd --bridge=none --iptables=false --ip6tables=false \
    --data-root "$state/data-root" --exec-root "$state/exec-root" \
    --pidfile "$state/dockerd.pidfile" -H "unix://$sock" >"$state/dockerd.log" 2>&1 9>&- &   # 9: the lock, not dockerd's
  echo $! >"$pidfile"
  for _ in $(seq 1 60); do
    if DOCKER_HOST=unix://$sock $DOCKER info >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then break; fi
    sleep 1
  done
  echo "engine: dockerd did not come up; the end of its log:" >&2
  tail -n 20 "$state/dockerd.log" >&2
  stop
  return 3
}

stop() {
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if ! ours "$pid"; then
    echo "engine: $pidfile names pid $pid, which is not this state's dockerd (gone, or another process now); not killing it" >&2
    rm -f "$pidfile"
    return 0
  fi
  echo "engine: stopping the dockerd this run started (pid $pid)" >&2
  kill "$pid"
  for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "engine: dockerd (pid $pid) still runs 30s after SIGTERM; left running, PID file $pidfile kept (kill it, then rerun engine.sh stop)" >&2
    return 1
  fi
  rm -f "$pidfile"
  # Its images, containers and volumes go with it. dockerd leaves mounts
  # behind (exec-root/netns/default, the host network's namespace): those
  # under this state only, deepest first.
  awk -v root="$state/" 'index($2, root) == 1 {print $2}' /proc/self/mounts | sort -r |
    while read -r m; do umount "$m" || umount -l "$m"; done
  rm -rf "$state/data-root" "$state/exec-root" 2>/dev/null ||
    echo "engine: could not remove all of $state/data-root and exec-root (a mount left behind?)" >&2
  return 0
}

host() {
  if [ -f "$pidfile" ] && ours "$(cat "$pidfile")"; then echo "unix://$sock"; fi
}

locked() {
  exec 9>"$state/lock"
  flock -w 120 9 || { echo "engine: $state/lock held for 120s by another engine.sh" >&2; exit 3; }
  "$@"
}

case "${1:-}" in
  ensure) locked ensure ;;
  stop) locked stop ;;
  host) host ;;
  compose) compose_cmd ;;
  *) echo "usage: $0 ensure|stop|host|compose" >&2; exit 2 ;;
esac
