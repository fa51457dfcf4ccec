#!/usr/bin/env bash
# Builds the stand-in images `make compose-smoke` runs in place of the
# official nats and postgres images, from what this machine has — no
# registry is reachable here (deploy/images/README.md):
#   $INTAKE_NATS_IMAGE      (intake-standin/nats:<go.mod's nats-server version>)
#   $INTAKE_POSTGRES_IMAGE  (intake-standin/postgres:<major>)
# Each is FROM scratch around a rootfs staged under bin/images/<name>/.
set -euo pipefail
cd "$(dirname "$0")/../.."
DOCKER=${DOCKER:-docker}
GO=${GO:-go}

nats_version=$($GO list -m -f '{{.Version}}' github.com/nats-io/nats-server/v2)
pg_bin=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)}
if [ -z "$pg_bin" ] || [ ! -x "$pg_bin/postgres" ]; then
  echo "build.sh: no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql)" >&2
  exit 1
fi
pg_home=$(dirname "$pg_bin")          # /usr/lib/postgresql/15
pg_major=$(basename "$pg_home")
busybox=$(command -v busybox || true)
if { [ -z "$busybox" ] || ldd "$busybox" >/dev/null 2>&1; } && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "build.sh: installing Debian's busybox-static" >&2
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static >/dev/null || true
  busybox=$(command -v busybox || true)
fi
if [ -z "$busybox" ] || ldd "$busybox" >/dev/null 2>&1; then
  echo "build.sh: need a static busybox: the nats image's wget, initdb's /bin/sh (Debian: apt-get install busybox-static)" >&2
  exit 1
fi
NATS_IMAGE=${INTAKE_NATS_IMAGE:-intake-standin/nats:${nats_version#v}}
PG_IMAGE=${INTAKE_POSTGRES_IMAGE:-intake-standin/postgres:$pg_major}

# ---- nats: nats-server from go.mod (the version the tests embed).
ctx=bin/images/nats
rm -rf "$ctx" && mkdir -p "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/bin" "$ctx/owned/var/lib/nats"
CGO_ENABLED=0 GOOS=linux $GO build -trimpath -ldflags "-s -w" -o "$ctx/rootfs/usr/local/bin/nats-server" github.com/nats-io/nats-server/v2
cp "$busybox" "$ctx/rootfs/bin/wget"   # busybox runs the applet its name says
$DOCKER build -q -f deploy/images/nats/Dockerfile -t "$NATS_IMAGE" "$ctx" >/dev/null
echo "built $NATS_IMAGE (nats-server $nats_version)"

# ---- postgres: Debian's server binaries, the libraries they load, share files.
ctx=bin/images/postgres
rm -rf "$ctx" && mkdir -p "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/etc" "$ctx/rootfs/tmp" \
  "$ctx/owned/var/lib/postgresql/data" "$ctx/owned/var/run/postgresql"
chmod 1777 "$ctx/rootfs/tmp"
chmod 700 "$ctx/owned/var/lib/postgresql/data"
CGO_ENABLED=0 GOOS=linux $GO build -trimpath -ldflags "-s -w" -o "$ctx/rootfs/usr/local/bin/docker-entrypoint" ./deploy/images/postgres/entrypoint
# stage PATH [cp flags]: copies PATH to the same path under the rootfs.
stage() { mkdir -p "$ctx/rootfs$(dirname "$1")" && cp "${@:2}" "$1" "$ctx/rootfs$(dirname "$1")/"; }
for b in postgres initdb pg_isready; do stage "$pg_bin/$b" -p; done
# initdb runs `postgres -V` and its bootstrap through popen(), i.e. /bin/sh.
mkdir -p "$ctx/rootfs/bin" && cp "$busybox" "$ctx/rootfs/bin/sh"
stage "$pg_home/lib" -R                                # extensions (plpgsql, dict_snowball, …)
# without the JIT provider (and its ~130 MB of LLVM): postgres then runs
# with jit off, as it does wherever the provider is not installed
rm -rf "$ctx/rootfs$pg_home"/lib/llvmjit* "$ctx/rootfs$pg_home/lib/bitcode"
stage "/usr/share/postgresql/$pg_major" -R             # catalogs initdb loads, timezonesets
if [ -d /usr/share/zoneinfo ]; then stage /usr/share/zoneinfo -RL; fi   # Debian builds --with-system-tzdata
# Every shared library the binaries and extensions load, at the path the
# dynamic loader resolves (the loader itself included).
{ for f in "$ctx/rootfs$pg_home"/bin/* "$ctx/rootfs$pg_home"/lib/*.so; do ldd "$f" 2>/dev/null || true; done; } |
  awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u |
  while read -r lib; do stage "$lib" -L; done
# initdb and postgres look their user up; glibc's files backend reads these.
echo "postgres:x:999:999::/var/lib/postgresql:/nonexistent" > "$ctx/rootfs/etc/passwd"
echo "postgres:x:999:" > "$ctx/rootfs/etc/group"
$DOCKER build -q --build-arg PG_MAJOR="$pg_major" -f deploy/images/postgres/Dockerfile -t "$PG_IMAGE" "$ctx" >/dev/null
echo "built $PG_IMAGE (PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') from $pg_bin)"
