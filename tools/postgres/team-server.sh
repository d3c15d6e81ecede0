#!/usr/bin/env bash
# A local PostgreSQL server for trying the team index by hand: a data folder (default /tmp/dsh-team-pg),
# a Unix socket in it and no TCP port. As root the server runs as `nobody`, as PostgreSQL requires.
#   tools/postgres/team-server.sh start   # prints the index URL
#   tools/postgres/team-server.sh stop    # stops it and deletes the folder
set -euo pipefail
dir=${DSH_TEAM_PG_DIR:-/tmp/dsh-team-pg}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bin/initdb" ] || bin=$(dirname "$(command -v initdb)")
as=()
[ "$(id -u)" = 0 ] && as=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
case "${1:-start}" in
  start)
    if [ ! -d "$dir/data" ]; then
      mkdir -p "$dir"
      [ "$(id -u)" = 0 ] && chown nobody:nogroup "$dir"
      "${as[@]}" "$bin/initdb" -A trust -U postgres -E UTF8 --locale=C -D "$dir/data" >/dev/null
    fi
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
      -o "-c listen_addresses= -k $dir" start >/dev/null
    echo "postgresql://postgres@/postgres?host=$dir"
    ;;
  stop)
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
    rm -rf "$dir"
    ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
