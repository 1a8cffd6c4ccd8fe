#!/bin/sh
# `make bench`: every benchmark, each against a baseline run in the same
# invocation. Uses the private test database under var/bench.
set -eu

B=${B:-build}
ROOT=$(pwd)
STATE=${AAS_BENCH_STATE_DIR:-$ROOT/var/bench}
mkdir -p "$STATE/log"

[ -d node_modules/@modelcontextprotocol/sdk ] || npm ci --no-audit --no-fund >/dev/null
sh deploy/devdb.sh start "$STATE"
# Before any benchmark VM (they have network devices now): nothing QEMU
# sends may leave for addresses beyond loopback.
sh tests/net-safety.sh install

port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
AAS_STATE_DIR=$STATE AAS_LISTEN=127.0.0.1:$port AAS_LOG_LEVEL=warn \
	"$B/aasd" >"$STATE/log/aasd-bench.log" 2>&1 &
aasd=$!
trap 'kill $aasd 2>/dev/null; wait $aasd 2>/dev/null || true' EXIT INT TERM
i=0
until curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 200 ] || { echo "aasd did not start"; cat "$STATE/log/aasd-bench.log"; exit 1; }
	sleep 0.05
done

echo "== MCP front end: aasd vs the official TypeScript SDK server =="
bash bench/mcp_front.sh "http://127.0.0.1:$port/v1/mcp"

# The VM layer: real guests (TCG here), the image from `make image`.
kill $aasd 2>/dev/null; wait $aasd 2>/dev/null || true
echo "== VMs: aasd vs raw libvirt and guest agent =="
node bench/vm.mjs "$ROOT/$B" "$STATE"

echo "== Preview proxy: aasd vs the raw forwarded port =="
node bench/preview.mjs "$ROOT/$B" "$STATE"

echo "== Expiry reaper =="
node bench/reaper.mjs "$ROOT/$B" "$STATE"
