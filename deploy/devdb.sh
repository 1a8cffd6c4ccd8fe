#!/bin/sh
# Private PostgreSQL cluster for development and tests, kept under the state
# directory and reachable only through a unix socket in <state>/run.
#   devdb.sh start|stop|restart|status|url   [state-dir]
set -eu

cmd=${1:-start}
state=${2:-${AAS_STATE_DIR:-var}}
mkdir -p "$state"
state=$(cd "$state" && pwd)
data=$state/pg
run=$state/run
logf=$state/log/postgres.log
bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)

# Root may not run the server; the Debian "postgres" user does.
if [ "$(id -u)" -eq 0 ]; then
	as_pg() { runuser -u postgres -- "$@"; }
	owner=postgres
else
	as_pg() { "$@"; }
	owner=$(id -un)
fi

# The server user must be able to walk down to the state directory even when
# it lives under a private directory (mktemp -d is mode 0700).
grant_traverse() {
	d=$state
	while [ "$d" != "/" ]; do
		if ! as_pg test -x "$d" 2>/dev/null; then
			chmod o+x "$d"
			echo "devdb: granted search permission on $d" >&2
		fi
		d=$(dirname "$d")
	done
}

init() {
	if [ -f "$data/PG_VERSION" ]; then
		return 0
	fi
	mkdir -p "$data" "$run" "$state/log"
	chown "$owner" "$data" "$run" "$state/log"
	chmod 700 "$data"
	as_pg "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 \
		--locale=C >/dev/null
	cat >>"$data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$run'
port = 5432
max_connections = 200
shared_buffers = 128MB
log_min_messages = warning
CONF
}

is_up() {
	as_pg "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1
}

start() {
	grant_traverse
	init
	mkdir -p "$run" "$state/log"
	chown "$owner" "$run" "$state/log"
	touch "$logf" && chown "$owner" "$logf"
	if ! is_up; then
		as_pg "$bindir/pg_ctl" -D "$data" -l "$logf" -w -t 60 start >/dev/null
	fi
	# Role and database for the service; both created once.
	psql_pg() { as_pg "$bindir/psql" -h "$run" -U postgres -d postgres -qtAX "$@"; }
	if [ "$(psql_pg -c "select 1 from pg_roles where rolname='aas'")" != "1" ]; then
		psql_pg -c "create role aas login"
	fi
	if [ "$(psql_pg -c "select 1 from pg_database where datname='aas'")" != "1" ]; then
		psql_pg -c "create database aas owner aas"
	fi
}

stop() {
	if [ -f "$data/PG_VERSION" ] && is_up; then
		as_pg "$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null
	fi
}

case "$cmd" in
start) start ;;
stop) stop ;;
restart) stop; start ;;
status) is_up && echo up || { echo down; exit 1; } ;;
url) echo "postgresql:///aas?host=$run&user=aas" ;;
*) echo "usage: devdb.sh start|stop|restart|status|url [state-dir]" >&2; exit 2 ;;
esac
