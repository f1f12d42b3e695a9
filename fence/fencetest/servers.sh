#!/usr/bin/env bash
# Starts PostgreSQL, MariaDB, Redis and Azurite (Azure Blob Storage's
# emulator: an object store with conditional writes) on loopback (throwaway
# data dirs, random free ports), runs a command with their addresses in the
# environment, then stops them and removes their data — also on failure or
# interrupt. Installs what is missing first: the Debian packages (as root),
# and Azurite from the npm registry into $RAFTLOCK_AZURITE_DIR (default
# /var/tmp/raftlock-azurite-3.35.0, kept for the next run).
#
#   bash fence/fencetest/servers.sh            # the fence tests against all three
#   bash fence/fencetest/servers.sh CMD ARGS…  # anything else (run from the repo root)
#
# The command sees RAFTLOCK_TEST_POSTGRES, RAFTLOCK_TEST_MYSQL,
# RAFTLOCK_TEST_REDIS and RAFTLOCK_TEST_AZURITE, and RAFTLOCK_FENCE_SERVERS=required (so that the
# tests fail instead of skipping when a server is unreachable).
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { echo "fence servers: $*" >&2; }

install_missing() {
	local need=()
	[ -x /usr/lib/postgresql/15/bin/postgres ] || ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
	command -v mariadbd >/dev/null 2>&1 || need+=(mariadb-server)
	command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
	command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
	[ ${#need[@]} -eq 0 ] && return 0
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		log "missing ${need[*]} and cannot install them (not root, or no apt-get)"; exit 1
	fi
	log "installing ${need[*]}"
	# Package scripts must not start system-wide services: we run our own.
	local policy=""
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && policy=1
	fi
	timeout 120 apt-get update -qq || log "apt-get update failed; trying the cached lists"
	DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
	[ -n "$policy" ] && rm -f /usr/sbin/policy-rc.d
	return 0
}

free_port() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
	done
	log "no free port"; exit 1
}

install_missing

azurite_version=3.35.0 # 3.36+ want Node.js 22
azdir=${RAFTLOCK_AZURITE_DIR:-/var/tmp/raftlock-azurite-$azurite_version}
if [ ! -x "$azdir/node_modules/.bin/azurite-blob" ]; then
	log "installing azurite $azurite_version into $azdir"
	mkdir -p "$azdir"
	timeout 300 npm install --prefix "$azdir" --no-audit --no-fund --silent "azurite@$azurite_version" >/dev/null
fi

dir=$(mktemp -d /tmp/raftlock-fence-servers.XXXXXX)
chmod 755 "$dir"
pg_pid="" my_pid="" redis_pid="" az_pid=""
pgbin=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/postgres | sort -V | tail -1)")
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

cleanup() {
	set +e
	[ -n "$pg_pid" ] && as_pg "$pgbin/pg_ctl" -D "$dir/pg" -m immediate stop >/dev/null 2>&1
	[ -n "$my_pid" ] && kill "$my_pid" 2>/dev/null && wait "$my_pid" 2>/dev/null
	[ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
	[ -n "$az_pid" ] && kill "$az_pid" 2>/dev/null && wait "$az_pid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# PostgreSQL: initdb refuses to run as root, so the data dir belongs to the
# postgres user when we are root.
pg_port=$(free_port)
mkdir "$dir/pg" "$dir/pgsock"
[ "$(id -u)" = 0 ] && chown postgres "$dir/pg" "$dir/pgsock"
as_pg "$pgbin/initdb" -D "$dir/pg" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/pg-initdb.log" 2>&1 ||
	{ cat "$dir/pg-initdb.log"; exit 1; }
as_pg "$pgbin/pg_ctl" -D "$dir/pg" -w -t 60 -l "$dir/pgsock/log" \
	-o "-p $pg_port -k $dir/pgsock -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=100" \
	start >/dev/null || { cat "$dir/pgsock/log"; exit 1; }
pg_pid=started

# MariaDB: a throwaway instance without grant tables (loopback only).
my_port=$(free_port)
mkdir "$dir/my"
timeout 120 mariadb-install-db --no-defaults --datadir="$dir/my" --user="$(id -un)" \
	--auth-root-authentication-method=normal --skip-test-db >"$dir/my-install.log" 2>&1 ||
	{ cat "$dir/my-install.log"; exit 1; }
mariadbd --no-defaults --datadir="$dir/my" --user="$(id -un)" --port="$my_port" --bind-address=127.0.0.1 \
	--socket="$dir/my.sock" --pid-file="$dir/my.pid" --skip-grant-tables --skip-name-resolve --skip-log-bin \
	--innodb-buffer-pool-size=64M --innodb-flush-log-at-trx-commit=2 --max-connections=200 \
	>"$dir/my.log" 2>&1 &
my_pid=$!
for _ in $(seq 1 120); do
	mariadb --no-defaults -h 127.0.0.1 -P "$my_port" -u root -e 'CREATE DATABASE IF NOT EXISTS fence' 2>/dev/null && break
	kill -0 "$my_pid" 2>/dev/null || { cat "$dir/my.log"; exit 1; }
	sleep 0.5
done
mariadb --no-defaults -h 127.0.0.1 -P "$my_port" -u root -e 'SELECT 1' >/dev/null || { cat "$dir/my.log"; exit 1; }

# Redis: no persistence (the data dir is thrown away anyway).
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >"$dir/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 1 60); do
	redis-cli -h 127.0.0.1 -p "$redis_port" ping >/dev/null 2>&1 && break
	kill -0 "$redis_pid" 2>/dev/null || { cat "$dir/redis.log"; exit 1; }
	sleep 0.5
done

# Azurite, Blob service only, without its telemetry (on by default).
az_port=$(free_port)
mkdir "$dir/az"
"$azdir/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$az_port" --location "$dir/az" \
	--silent --skipApiVersionCheck --disableTelemetry >"$dir/az.log" 2>&1 &
az_pid=$!
for _ in $(seq 1 60); do
	(exec 3<>"/dev/tcp/127.0.0.1/$az_port") 2>/dev/null && break
	kill -0 "$az_pid" 2>/dev/null || { cat "$dir/az.log"; exit 1; }
	sleep 0.5
done

export RAFTLOCK_TEST_POSTGRES="postgres://postgres@127.0.0.1:$pg_port/postgres?sslmode=disable"
export RAFTLOCK_TEST_MYSQL="root@tcp(127.0.0.1:$my_port)/fence"
export RAFTLOCK_TEST_REDIS="127.0.0.1:$redis_port"
export RAFTLOCK_TEST_AZURITE="http://127.0.0.1:$az_port"
export RAFTLOCK_FENCE_SERVERS=required
log "$("$pgbin/postgres" --version); $(mariadbd --version | sed 's/ for .*//'); $(redis-server --version | cut -d' ' -f1-3); azurite $("$azdir/node_modules/.bin/azurite-blob" --version)"
log "PostgreSQL :$pg_port, MariaDB :$my_port, Redis :$redis_port, Azurite :$az_port (data in $dir)"

if [ $# -eq 0 ]; then
	set -- go test -count=1 -v -run '^TestStoreFencesOnServers$' ./fence/
fi
"$@"
