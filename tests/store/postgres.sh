#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on this machine, for the response store's tests (tests/server/store).
#
#   tests/store/postgres.sh install   install Debian's postgresql (root + apt-get only)
#   tests/store/postgres.sh start     initdb a cluster in $QUALFLOW_PG_DIR, start it on 127.0.0.1:$QUALFLOW_PG_PORT
#                                     (its socket in that folder too), wait until it answers; prints its URL
#   tests/store/postgres.sh stop      stop that cluster (pg_ctl, by its data folder) and remove the folder
#   tests/store/postgres.sh url       print the cluster's URL
#
# PostgreSQL refuses to run as root: as root, the cluster belongs to, and runs as, the `postgres` user
# (Debian's package makes it); as anyone else it runs as that user. Authentication is `trust` on
# 127.0.0.1 and the folder's socket only: a test cluster, never a server for anything else.
# Exit status 3 means "PostgreSQL cannot be set up here", with the reason on stderr (the tests skip and
# print it).
set -euo pipefail

DIR="${QUALFLOW_PG_DIR:-/tmp/qualflow-pg}"
PORT="${QUALFLOW_PG_PORT:-55432}"
DATA="$DIR/data"
USER_NAME=qualflow

cannot() { echo "postgres.sh: $*" >&2; exit 3; }

bindir() {   # the folder of initdb/pg_ctl: on PATH, else Debian's newest /usr/lib/postgresql/N/bin
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v pg_ctl)"; return 0
  fi
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
  [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && echo "$d"
}

install() {
  bindir >/dev/null && return 0
  command -v apt-get >/dev/null 2>&1 || cannot "postgresql not installed and no apt-get here"
  [ "$(id -u)" = 0 ] || cannot "postgresql not installed and not root (cannot apt-get install)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) \
    || cannot "apt-get install postgresql failed"
  bindir >/dev/null || cannot "postgresql installed but no initdb/pg_ctl found"
}

as_owner() {   # run a command as the cluster's owner: `postgres` when we are root, else ourselves
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || cannot "running as root and there is no postgres user to run the cluster"
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

url() { echo "postgresql://$USER_NAME@127.0.0.1:$PORT/postgres"; }

start() {
  local bin
  bin="$(bindir)" || install
  bin="$(bindir)" || cannot "no initdb/pg_ctl found"
  mkdir -p "$DIR"
  [ "$(id -u)" = 0 ] && { id postgres >/dev/null 2>&1 || cannot "running as root and no postgres user"; \
    chown postgres "$DIR"; chmod 700 "$DIR"; }
  if [ ! -f "$DATA/PG_VERSION" ]; then
    as_owner "$bin/initdb" -D "$DATA" -U "$USER_NAME" --auth=trust -E UTF8 --no-sync \
      >"$DIR/initdb.log" 2>&1 || { tail -5 "$DIR/initdb.log" >&2; cannot "initdb failed"; }
  fi
  as_owner "$bin/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -k $DIR" start >/dev/null \
    || { tail -5 "$DIR/server.log" >&2 || true; cannot "pg_ctl start failed (port $PORT taken?)"; }
  url
}

stop() {
  local bin
  if bin="$(bindir)" && [ -f "$DATA/postmaster.pid" ]; then
    as_owner "$bin/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null || true
  fi
  rm -rf "$DIR"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  url) url ;;
  *) echo "usage: $0 install|start|stop|url" >&2; exit 2 ;;
esac
