#!/bin/sh
# make fuzz: runs every libFuzzer harness built under FUZZB (build/fuzz)
# for SECONDS each, from its corpus in tests/fuzz/corpus/<name>. New inputs
# go to FUZZB/corpus/<name>, crashing ones to FUZZB/crash-<name>-*. Prints
# executions and crashes per harness; fails when any crashed.
set -u

FUZZB=${1:-build/fuzz}
SECONDS_EACH=${2:-60}
total=0
crashed=0

for src in tests/fuzz/fuzz_*.c; do
	name=$(basename "$src" .c)
	name=${name#fuzz_}
	bin=$FUZZB/tests/fuzz_$name
	work=$FUZZB/corpus/$name
	log=$FUZZB/fuzz-$name.log
	mkdir -p "$work"
	"$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$FUZZB/crash-$name-" \
		"$work" "tests/fuzz/corpus/$name" >"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
	execs=${execs:-0}
	crashes=0
	if [ "$rc" -ne 0 ]; then
		crashes=1
		crashed=$((crashed + 1))
	fi
	total=$((total + execs))
	printf 'fuzz %-28s %12s executions, %s crashes\n' "$name" "$execs" "$crashes"
	if [ "$rc" -ne 0 ]; then
		grep -E 'ERROR|SUMMARY|check failed|Test unit written' "$log" | head -n 10 | sed 's/^/    /'
		echo "    (all of it in $log)"
	fi
done
echo "fuzz: $total executions, $crashed crashing harnesses"
[ "$crashed" -eq 0 ]
