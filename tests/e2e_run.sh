#!/bin/sh
# The end-to-end part of make test (tests/run.sh runs it): every file of
# tests/e2e against real aasd processes, PostgreSQL and VMs.
#
#   tests/e2e_run.sh STATE BUILD_DIR RESULT_FILE
#
# Files run in E2E_LANES (2) lanes at once (three starved a fork's guest
# agent of CPU on a two-core machine), each lane with a state
# directory (STATE1, STATE2, ...: VMs, libvirt roots, hypervisor hosts)
# and a database (aas_1, aas_2, ...) of its own, so that two files share
# nothing but the machine. A file whose first lines say "make test:
# alone" (because it restarts PostgreSQL, changes the machine's isolation
# rule, or measures latency another file's VMs would disturb) runs before
# the lanes start, with nothing beside it, in STATE and database aas.
# Each file runs in a node of its own, for at most E2E_FILE_S (900); the
# whole part gets E2E_TOTAL_S (3900): a hang is a failure with a name.
# Each file's output is printed whole when it ends ("e2e: start" lines
# show what runs meanwhile). RESULT_FILE gets "PASSED FAILED".
# AAS_E2E="tests/e2e/a.test.mjs ..." runs only those files.
set -u

STATE=$1
B=$2
RESULT=$3
ROOT=$(pwd)
LOG=$STATE/log
LANES=${E2E_LANES:-2}
FILE_S=${E2E_FILE_S:-900}
TOTAL_S=${E2E_TOTAL_S:-3900}
# Started first in the lanes, longest first (each took a minute or more
# run alone here), so that no lane ends late on one of them; the others
# follow in name order.
SLOW_FIRST="snapshot hostile_guest jail files pause vm_crash billing mcp2026 blackbox fleet pool network
restore_xml console seed production"

pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
if [ "$(id -u)" -eq 0 ]; then aspg="runuser -u postgres --"; else aspg=""; fi

# A fresh database each run: tests never see a previous run's rows.
fresh_db() { # NAME
	$aspg "$pgbin/psql" -h "$STATE/run" -U postgres -d postgres -qtAX \
		-c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1 OWNER aas" \
		>/dev/null
}

# VMs and hypervisor daemons of an earlier run (QEMU outlives the aasd
# that started it) go, and their directories with them.
fresh_state() { # DIR
	pkill -f "qemu-system.*$1/(prod/)?vms/" 2>/dev/null || true
	pkill -f "libvirtd -f $1/hosts/" 2>/dev/null || true
	pkill -f "nginx -e $1/" 2>/dev/null || true
	rm -rf "$1"/libvirt-* "$1/vms" "$1/uids" "$1/hosts"
	mkdir -p "$1/log"
}

results=$LOG/e2e-results.txt
times=$LOG/e2e-times.txt
out=$LOG/e2e.txt
: >"$results"
: >"$times"
: >"$out"
e2e_end=$(($(date +%s) + TOTAL_S))

# Prints stdin whole, never interleaved with another lane's.
print_locked() {
	while ! mkdir "$LOG/print.lock" 2>/dev/null; do sleep 0.1; done
	cat
	rmdir "$LOG/print.lock"
}

# Runs one file with a lane's state and database; records
# "PASSED FAILED SECONDS FILE" in $results.
run_file() { # FILE STATE DB LANE
	file=$1
	t0=$(date +%s)
	left=$((e2e_end - t0))
	if [ "$left" -le 0 ]; then
		echo "e2e: $file not run: the e2e part is past $TOTAL_S s" | print_locked
		echo "0 1 0 $file" >>"$results"
		return
	fi
	limit=$FILE_S
	[ "$left" -ge "$limit" ] || limit=$left
	one=$LOG/e2e-$4-$(basename "$file" .test.mjs).txt
	echo "e2e: start $file (lane $4)" | print_locked
	AAS_BUILD_DIR="$ROOT/$B" AAS_TEST_STATE_DIR="$2" \
		AAS_TEST_DATABASE_URL="postgresql:///$3?host=$STATE/run&user=aas" \
		timeout -k 30 "$limit" \
		node --test --test-concurrency=1 --test-force-exit \
		--test-timeout="$((limit * 1000))" \
		--test-reporter=spec --test-reporter-destination=stdout "$file" >"$one" 2>&1
	rc=$?
	[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || echo "e2e: $file stopped after $limit s" >>"$one"
	# The spec reporter's summary; a cancelled test counts as failed,
	# and so does a file that failed without one.
	fp=$(sed -n 's/^ℹ pass \([0-9]*\)$/\1/p' "$one" | tail -n 1)
	ff=$(sed -n 's/^ℹ fail \([0-9]*\)$/\1/p' "$one" | tail -n 1)
	fc=$(sed -n 's/^ℹ cancelled \([0-9]*\)$/\1/p' "$one" | tail -n 1)
	fp=${fp:-0}
	ff=$((${ff:-0} + ${fc:-0}))
	[ "$rc" -eq 0 ] || [ "$ff" -gt 0 ] || ff=1
	secs=$(($(date +%s) - t0))
	echo "$fp $ff $secs $file" >>"$results"
	echo "$secs $file" >>"$times"
	{ cat "$one"; echo "e2e: $file: $fp passed, $ff failed in $secs s (lane $4)"; } |
		tee -a "$out" | print_locked
}

# The files: alone ones, then the shared queue, slow ones first.
alone=""
queue=$LOG/e2e-queue.txt
: >"$queue"
all=${AAS_E2E:-$(ls tests/e2e/*.test.mjs)}
for f in $all; do
	if head -n 30 "$f" | grep -q "make test: alone"; then
		alone="$alone $f"
	fi
done
for s in $SLOW_FIRST; do
	for f in $all; do
		[ "$f" = "tests/e2e/$s.test.mjs" ] && ! echo " $alone " | grep -q " $f " &&
			echo "$f" >>"$queue"
	done
done
for f in $all; do
	echo " $alone " | grep -q " $f " || grep -qxF "$f" "$queue" || echo "$f" >>"$queue"
done

# Hands out the queue's next file, one lane at a time.
next=$LOG/e2e-queue.next
echo 1 >"$next"
claim() {
	while ! mkdir "$queue.lock" 2>/dev/null; do sleep 0.1; done
	n=$(cat "$next")
	echo $((n + 1)) >"$next"
	rmdir "$queue.lock"
	sed -n "${n}p" "$queue"
}

lane() { # N
	st=$STATE$1
	while f=$(claim) && [ -n "$f" ]; do
		run_file "$f" "$st" "aas_$1" "$1"
	done
}

rm -rf "$LOG/print.lock" "$queue.lock"
fresh_state "$STATE"
fresh_db aas
for f in $alone; do
	run_file "$f" "$STATE" aas alone
done
i=1
while [ "$i" -le "$LANES" ]; do
	fresh_state "$STATE$i"
	fresh_db "aas_$i"
	lane "$i" &
	i=$((i + 1))
done
wait

p=$(awk '{ s += $1 } END { print s + 0 }' "$results")
f=$(awk '{ s += $2 } END { print s + 0 }' "$results")
echo "$p $f" >"$RESULT"
