#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests and benchmarks: initdb in a temp dir, owned by a
# non-root user (PostgreSQL refuses to run as root), listening on loopback only, trust auth for
# the local user `ecapi`. Nothing here is for production.
#
#   scripts/pg-test-cluster.sh start [DIR]   initializes (once) and starts; prints the URL on stdout
#   scripts/pg-test-cluster.sh url   [DIR]   prints the URL
#   scripts/pg-test-cluster.sh stop  [DIR]   stops the cluster and deletes DIR
#
# DIR defaults to $ECAPI_PG_DIR or /tmp/ecapi-pg-test; the port to $ECAPI_PG_PORT or 55432.
# fsync and synchronous_commit keep their defaults (on): the durability tests depend on them.
set -euo pipefail
cmd=${1:-}
dir=${2:-${ECAPI_PG_DIR:-/tmp/ecapi-pg-test}}
port=${ECAPI_PG_PORT:-55432}
url="postgres://ecapi@127.0.0.1:${port}/postgres"

bindir=""
if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then bindir=$(pg_config --bindir); fi
if [ -z "$bindir" ]; then
  bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
fi
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  echo "pg-test-cluster: PostgreSQL server binaries not found (apt-get install postgresql)" >&2
  exit 1
fi

# Run as a non-root user: `postgres` (created by the Debian package) when we are root.
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u "${ECAPI_PG_USER:-postgres}" -- "$@"; else "$@"; fi
}

case "$cmd" in
  start)
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      mkdir -p "$dir"
      if [ "$(id -u)" = 0 ]; then chown "${ECAPI_PG_USER:-postgres}" "$dir"; fi
      as_owner "$bindir/initdb" -D "$dir/data" -U ecapi -A trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
        || as_owner "$bindir/initdb" -D "$dir/data" -U ecapi -A trust -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    if ! as_owner "$bindir/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
      as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=400 -c shared_buffers=256MB" start >/dev/null \
        || { cat "$dir/server.log" >&2; exit 1; }
    fi
    echo "$url"
    ;;
  url)
    echo "$url"
    ;;
  stop)
    if [ -f "$dir/data/PG_VERSION" ]; then
      as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "usage: $0 start|url|stop [DIR]" >&2
    exit 2
    ;;
esac
