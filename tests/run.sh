#!/bin/sh
# Runs every test: the lint checks (one test each), cmocka unit tests, then
# end-to-end tests against the real daemon and a private PostgreSQL. Ends
# with "N passed, N failed".
# AAS_E2E="tests/e2e/a.test.mjs ..." runs only those end-to-end files;
# AAS_SKIP_LINT=1 / AAS_SKIP_UNIT=1 / AAS_SKIP_E2E=1 leave a part out;
# the e2e files run in E2E_LANES (2) lanes (tests/e2e_run.sh); E2E_FILE_S
# (900) and E2E_TOTAL_S (3900) bound an e2e file and the e2e part; each
# e2e file is timed, and the ten slowest are listed at the end.
# AAS_VARIANTS="asan-build fuzz-build" (make test) also runs those make
# targets, one test each, beside the others.
set -u
run_start=$(date +%s)

B=${B:-build}
ROOT=$(pwd)
STATE=${AAS_TEST_STATE_DIR:-$ROOT/var/test}
LOG=$STATE/log
mkdir -p "$LOG"

passed=0
failed=0

# --- the sanitizer and fuzz builds ---
# Built, not run (make asan and make fuzz run them), so that neither breaks
# unseen. They are about 4 minutes of CPU (the ASan build 160 s, the fuzz
# build 80 s): 2 minutes of waiting in front of the tests on two cores,
# while the lint and unit tests leave more than a core idle for about 3
# minutes and the alone e2e files about one. So they start first, at idle
# CPU priority: they take only what the tests leave (the alone files took
# the same time beside them). In a session of their own (its id in
# variants.pgid), so that the run can end all of them.
if chrt --idle 0 true 2>/dev/null; then idle="chrt --idle 0"; else idle="nice -n 19"; fi
variants_pid=""
if [ -n "${AAS_VARIANTS:-}" ]; then
	: >"$LOG/variants.txt"
	rm -f "$LOG/variants.pgid"
	# shellcheck disable=SC2016
	setsid -w sh -c 'echo $$ >"$3/variants.pgid"
	for v in $1; do
		$2 env -u MAKEFLAGS -u MAKELEVEL make -j"$(nproc)" "$v" >"$3/build-$v.txt" 2>&1
		echo "$v $?" >>"$3/variants.txt"
	done' variants "$AAS_VARIANTS" "$idle" "$LOG" &
	variants_pid=$!
fi

# The e2e tests' Node packages, installed while the lint and unit tests
# run (from a fresh clone npm ci takes about a minute of mostly waiting);
# again when package-lock.json changed since (npm ci leaves its own copy,
# node_modules/.package-lock.json): a checkout that pins new packages
# gets them before its tests import them. At idle CPU priority too: the
# unit tests measure latencies (test_achan_hostile) that its unpacking
# would move.
npm_pid=""
if [ "${AAS_SKIP_E2E:-0}" != 1 ] && { [ ! -d node_modules/@modelcontextprotocol/sdk ] ||
	[ package-lock.json -nt node_modules/.package-lock.json ]; }; then
	$idle npm ci --no-audit --no-fund >"$LOG/npm-ci.txt" 2>&1 &
	npm_pid=$!
fi

# The run leaves nothing running, its private PostgreSQL and the jobs
# above included, also when it fails or is interrupted (the exit status
# stays the run's).
trap 'sh deploy/devdb.sh stop "$STATE" >/dev/null 2>&1
	[ -z "$npm_pid" ] || kill "$npm_pid" 2>/dev/null
	[ -z "$variants_pid" ] || kill -- "-$(cat "$LOG/variants.pgid")" 2>/dev/null' EXIT
trap 'exit 130' INT TERM

# --- lint ---
# Banned calls and format are checked on the paths listed in
# tools/lint/banned-paths and format-paths (make lint checks everything);
# layers, sizes and prefixes on the whole tree, like make lint.
lint() { # NAME COMMAND...
	name=$1
	shift
	out=$LOG/lint-$name.txt
	if "$@" >"$out" 2>&1; then
		passed=$((passed + 1))
		printf 'lint %-28s %3s passed, %s failed\n' "$name" 1 0
	else
		failed=$((failed + 1))
		printf 'lint %-28s %3s passed, %s failed\n' "$name" 0 1
		sed 's/^/    /' "$out" | head -n 60
		[ "$(wc -l <"$out")" -le 60 ] || echo "    ... (all of it in $out)"
	fi
}
if [ "${AAS_SKIP_LINT:-0}" != 1 ]; then
	lint layers sh tools/lint/layers.sh
	lint banned sh tools/lint/banned.sh -l tools/lint/banned-paths
	lint fmt sh tools/lint/fmt.sh
	lint format sh tools/lint/format.sh -l tools/lint/format-paths
	lint size sh tools/lint/size.sh
	lint prefix sh tools/lint/prefix.sh
	lint mustcheck sh tools/lint/mustcheck.sh
	lint checkers sh tests/lint/checkers.sh
fi

# PostgreSQL before the unit tests: the sandbox service's tests use it,
# each run on a fresh database of their own (the e2e part keeps "aas").
sh deploy/devdb.sh start "$STATE" || { echo "database start failed"; failed=$((failed + 1)); }
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
if [ "$(id -u)" -eq 0 ]; then aspg="runuser -u postgres --"; else aspg=""; fi
$aspg "$pgbin/psql" -h "$STATE/run" -U postgres -d postgres -qtAX \
	-c "DROP DATABASE IF EXISTS aas_unit WITH (FORCE)" -c "CREATE DATABASE aas_unit OWNER aas" \
	>/dev/null
export AAS_TEST_DATABASE_URL="postgresql:///aas_unit?host=$STATE/run&user=aas"

# --- unit ---
for t in "$B"/tests/test_*; do
	[ "${AAS_SKIP_UNIT:-0}" != 1 ] || break
	[ -f "$t" ] && [ -x "$t" ] || continue
	name=$(basename "$t")
	out=$LOG/unit-$name.txt
	"$t" >"$out" 2>&1
	rc=$?
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n 1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n 1)
	p=${p:-0}
	f=${f:-0}
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1 # crashed or died before reporting
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	printf 'unit %-28s %3s passed, %s failed\n' "$name" "$p" "$f"
	[ "$f" -eq 0 ] || sed 's/^/    /' "$out" | tail -n 40
done

# --- fuzz corpus ---
# Each libFuzzer harness (tests/fuzz/) replays its saved corpus, built with
# the project's compiler and a plain main; one test per harness.
for t in "$B"/tests/fuzz_*; do
	[ "${AAS_SKIP_UNIT:-0}" != 1 ] || break
	[ -f "$t" ] && [ -x "$t" ] || continue
	name=$(basename "$t")
	out=$LOG/$name.txt
	if "$t" "tests/fuzz/corpus/${name#fuzz_}" >"$out" 2>&1; then
		passed=$((passed + 1))
		printf 'fuzz %-28s %3s passed, %s failed\n' "$name" 1 0
	else
		failed=$((failed + 1))
		printf 'fuzz %-28s %3s passed, %s failed\n' "$name" 0 1
		sed 's/^/    /' "$out" | tail -n 40
	fi
done

# --- end to end ---
if [ "${AAS_SKIP_E2E:-0}" != 1 ]; then
	if [ -n "$npm_pid" ] && ! wait "$npm_pid"; then
		echo "npm ci failed:"; tail -n 20 "$LOG/npm-ci.txt"; failed=$((failed + 1))
	fi
	npm_pid=""
	sh deploy/devdb.sh start "$STATE" || { echo "database start failed"; failed=$((failed + 1)); }
	# Before any sandbox with a network device boots: nothing QEMU sends
	# may leave for addresses beyond loopback and the tests' namespaces.
	sh tests/net-safety.sh install || { echo "network safety rule failed"; failed=$((failed + 1)); }
	# The files, in lanes (tests/e2e_run.sh); their output as each ends.
	out=$LOG/e2e.txt
	times=$LOG/e2e-times.txt
	: >"$LOG/e2e-failed.txt"
	echo "0 1" >"$LOG/e2e-result.txt"
	sh tests/e2e_run.sh "$STATE" "$B" "$LOG/e2e-result.txt"
	read -r p f <"$LOG/e2e-result.txt"
	passed=$((passed + p))
	failed=$((failed + f))
	# What failed, again at the end where a cut log still shows it: each
	# failing test's name and the first lines of its error.
	if [ "$f" -gt 0 ]; then
		echo "e2e: what failed (all of it in $out):"
		awk '/^✖ failing tests:/ { on = 1; next } /^(✔|▶|ℹ|e2e: )/ { on = 0 }
			on && !/^ +at / && !/^ *$/' "$out" | head -n 80 | sed 's/^/    /'
		# And the shortest form of it for the very end of the run.
		awk '/^✖ failing tests:/ { on = 1; next } /^(✔|▶|ℹ|e2e: )/ { on = 0 }
			on && (/^✖ / || /^  [A-Za-z]*Error/)' "$out" | head -n 16 >"$LOG/e2e-failed.txt"
	fi
	echo "e2e: the ten slowest files (seconds), of $(awk '{ s += $1 } END { print s + 0 }' "$times") s in all:"
	sort -rn "$times" | head -n 10 | sed 's/^/    /'
	printf 'e2e  %3s passed, %s failed\n' "$p" "$f"
	# Every test stops its VMs; one still running here is a leak, counted
	# as a failure and ended so the run leaves nothing behind.
	# (Each lane's state directory is STATE1, STATE2, ...; production.test.mjs
	# keeps its aasd's, VMs too, in STATE/prod.)
	vms="$STATE[0-9]*/(prod/)?vms/"
	left=$(pgrep -fc "qemu-system.*$vms" || true)
	if [ "${left:-0}" -gt 0 ]; then
		echo "e2e left $left VM(s) running:"
		pgrep -af "qemu-system.*$vms" | grep -Eo "$vms[^/]*" | sort -u
		pkill -f "qemu-system.*$vms" 2>/dev/null || true
		failed=$((failed + 1))
	fi
	# production.test.mjs's nginx (its configuration is under $STATE).
	left=$(pgrep -fc "nginx -e $STATE/" || true)
	if [ "${left:-0}" -gt 0 ]; then
		echo "e2e left $left nginx master(s) running"
		pkill -f "nginx -e $STATE/" 2>/dev/null || true
		failed=$((failed + 1))
	fi
	# The fleet tests' libvirt daemons too.
	left=$(pgrep -fc "libvirtd -f $STATE[0-9]*/hosts/" || true)
	if [ "${left:-0}" -gt 0 ]; then
		echo "e2e left $left libvirt daemon(s) running"
		pkill -f "libvirtd -f $STATE[0-9]*/hosts/" 2>/dev/null || true
		failed=$((failed + 1))
	fi
	# And the network namespaces the tests made (each removes its own on
	# exit; a killed test file cannot).
	# A name ends in its test process's pid: one whose process still runs
	# belongs to another run on this machine and is left alone.
	left=""
	for ns in $(ip netns list 2>/dev/null | awk '/^aas-test-/ {print $1}'); do
		kill -0 "${ns##*-}" 2>/dev/null || left="$left $ns"
	done
	if [ -n "$left" ]; then
		echo "e2e left network namespace(s): $left"
		for ns in $left; do ip netns del "$ns" 2>/dev/null || true; done
		failed=$((failed + 1))
	fi
	left=$(pgrep -fc "$ROOT/$B/aasd" || true)
	if [ "${left:-0}" -gt 0 ]; then
		echo "e2e left $left aasd process(es) running"
		pkill -f "$ROOT/$B/aasd" 2>/dev/null || true
		failed=$((failed + 1))
	fi
	# The browser tests' Chromium: each profile is a directory
	# $STATE/browser/aas-test-chromium-* (tests/e2e/lib/browser.mjs), named
	# on the command line of the browser and of its child processes; no
	# other Chromium is touched.
	left=$(pgrep -fc "$STATE[0-9]*/browser/aas-test-chromium-" || true)
	if [ "${left:-0}" -gt 0 ]; then
		echo "e2e left $left Chromium process(es) running"
		pkill -KILL -f "$STATE[0-9]*/browser/aas-test-chromium-" 2>/dev/null || true
		failed=$((failed + 1))
	fi
	# Profiles of browsers that were killed, and their singleton socket
	# directories in TMPDIR (each profile's SingletonSocket links there).
	for l in "$STATE"*/browser/aas-test-chromium-*/SingletonSocket; do
		d=$(dirname "$(readlink "$l" 2>/dev/null || echo /)")
		case $d in */org.chromium.Chromium.*) rm -rf "$d" ;; esac
	done
	rm -rf "$STATE"*/browser
fi

# The builds' results (waited for: they may still run here).
if [ -n "$variants_pid" ]; then
	wait "$variants_pid"
	for v in $AAS_VARIANTS; do
		if [ "$(awk -v v="$v" '$1 == v { print $2 }' "$LOG/variants.txt")" = 0 ]; then
			passed=$((passed + 1))
			printf 'build %-27s %3s passed, %s failed\n' "$v" 1 0
		else
			failed=$((failed + 1))
			printf 'build %-27s %3s passed, %s failed\n' "$v" 0 1
			echo "    make $v failed; its last lines (all of it in $LOG/build-$v.txt):"
			tail -n 30 "$LOG/build-$v.txt" | sed 's/^/    /'
		fi
	done
	variants_pid=""
fi

if [ "${AAS_SKIP_E2E:-0}" != 1 ] && [ -s "$LOG/e2e-failed.txt" ]; then
	echo "e2e tests that failed:"
	sed 's/^/    /' "$LOG/e2e-failed.txt"
fi
# The whole run's time, from make test's start (its install and build
# included) when make test gave it, else from this script's.
t0=$(cat "${AAS_TEST_START_FILE:-/nonexistent}" 2>/dev/null || echo "$run_start")
echo "make test took $(($(date +%s) - t0)) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
