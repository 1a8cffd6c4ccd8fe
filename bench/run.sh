#!/bin/sh
# `make bench`: every benchmark, each against a baseline run in the same
# invocation. Uses the private test database under var/bench.
# Every part runs even when an earlier one failed (each starts its own aasd);
# the exit status is 1 when a part failed, and the failed parts are named
# last. A missed target is a figure, not a failure.
# BENCH_ONLY="noisy preview" runs only the parts named (mcp_front, mcp_era, vm, pause, snapshot,
# files, agent, sync, preview, reaper, noisy, density, fleet, jail); empty runs all.
set -eu

B=${B:-build}
ROOT=$(pwd)
STATE=${AAS_BENCH_STATE_DIR:-$ROOT/var/bench}
mkdir -p "$STATE/log"

die() { echo "bench: $*" >&2; exit 1; }

# The front-end benchmark's aasd; empty when none runs. Stopping is
# idempotent: the EXIT trap runs under `set -e`, and a failing `kill` of an
# aasd already stopped would turn a good run's status into 1.
aasd=
stop_aasd() {
	[ -n "$aasd" ] || return 0
	kill "$aasd" 2>/dev/null || true
	wait "$aasd" 2>/dev/null || true
	aasd=
}
trap stop_aasd EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

failed=
# part NAME COMMAND...: runs one benchmark; a failure is reported, named and
# remembered, and the next part still runs.
part() {
	part_name=$1
	shift
	case " ${BENCH_ONLY:-$part_name} " in
	*" $part_name "*) ;;
	*) return 0 ;;
	esac
	part_rc=0
	"$@" || part_rc=$?
	if [ "$part_rc" -ne 0 ]; then
		echo "bench: $part_name FAILED (exit $part_rc)" >&2
		failed="$failed $part_name"
	fi
	return 0
}

[ -d node_modules/@modelcontextprotocol/sdk ] || npm ci --no-audit --no-fund >/dev/null ||
	die "setup: npm ci failed"
sh deploy/devdb.sh start "$STATE" || die "setup: the benchmark database did not start"
# Before any benchmark VM (they have network devices now): nothing QEMU
# sends may leave for addresses beyond loopback.
sh tests/net-safety.sh install || die "setup: the network safety rule was not installed"

# start_front_aasd LOG: an aasd on a free port of 127.0.0.1 (no VMs) into
# $aasd, its port into $port; 1 when it did not start.
start_front_aasd() {
	port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
	AAS_STATE_DIR=$STATE AAS_LISTEN=127.0.0.1:$port AAS_LOG_LEVEL=warn \
		"$B/aasd" >"$STATE/log/$1" 2>&1 &
	aasd=$!
	i=0
	until curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -ge 200 ] || ! kill -0 "$aasd" 2>/dev/null; then
			echo "bench: aasd did not start" >&2
			cat "$STATE/log/$1" >&2
			stop_aasd
			return 1
		fi
		sleep 0.05
	done
}

mcp_front() {
	start_front_aasd aasd-bench.log || return 1
	front_rc=0
	bash bench/mcp_front.sh "http://127.0.0.1:$port/v1/mcp" || front_rc=$?
	stop_aasd
	return "$front_rc"
}

part mcp_front echo "== MCP front end: aasd vs the official TypeScript SDK server =="
part mcp_front mcp_front

# get_usage with a key: 2026-07-28 (stateless) against 2025-11-25 (session),
# both against the SDK server.
mcp_era() {
	start_front_aasd aasd-bench-era.log || return 1
	era_rc=0
	key=$(AAS_STATE_DIR=$STATE "$B/aasctl" account create --email "bench-era-$$@bench.invalid" |
		node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(0,"utf8")).api_key)') ||
		era_rc=1
	[ "$era_rc" -ne 0 ] || MCP_API_KEY=$key bash bench/mcp_era.sh "http://127.0.0.1:$port/v1/mcp" ||
		era_rc=$?
	stop_aasd
	return "$era_rc"
}
part mcp_era echo "== MCP revisions: 2026-07-28 stateless vs 2025-11-25 with a session =="
part mcp_era mcp_era

# The VM layer: real guests (TCG here), the image from `make image`.
part vm echo "== VMs: aasd vs raw libvirt and guest agent =="
part vm node bench/vm.mjs "$ROOT/$B" "$STATE"

part files echo "== Files: REST raw bytes vs MCP base64, same VM =="
part files node bench/files.mjs "$ROOT/$B" "$STATE"

part agent echo "== Agent path: aas-agent vs qemu-ga and the raw port, same VM =="
part agent node bench/agent.mjs "$ROOT/$B" "$STATE"

part sync echo "== Bridge sync: one tar stream vs one upload of the same bytes, same VM =="
part sync node bench/sync.mjs "$ROOT/$B" "$STATE"

part preview echo "== Preview proxy: aasd vs the raw forwarded port =="
part preview node bench/preview.mjs "$ROOT/$B" "$STATE"

part pause echo "== Pause and resume: against a cold create of the same size =="
part pause node bench/pause.mjs "$ROOT/$B" "$STATE"

part snapshot echo "== Snapshots: booted-image creates and forks against a cold create and a warm-pool claim =="
part snapshot node bench/snapshot.mjs "$ROOT/$B" "$STATE"

part reaper echo "== Expiry reaper =="
part reaper node bench/reaper.mjs "$ROOT/$B" "$STATE"

part noisy echo "== Noisy neighbour: account B idle vs account A using all it may =="
part noisy node bench/noisy.mjs "$ROOT/$B" "$STATE"

part density echo "== Host memory per idle sandbox: against what its guest uses =="
part density node bench/density.mjs "$ROOT/$B" "$STATE"

part fleet echo "== A fleet of hosts: placement, a remote host, evacuation =="
part fleet node bench/fleet.mjs "$ROOT/$B" "$STATE"

part jail echo "== A busy VM next door: account B's commands while A's VM spins and writes =="
part jail node bench/jail.mjs "$ROOT/$B" "$STATE"

[ -z "$failed" ] || die "failed:$failed"
