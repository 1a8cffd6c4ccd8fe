#!/bin/sh
# checkers.sh - tests of the lint checks (tools/lint/): on a small tree with
# one fault of each kind every checker fails and names the file and line;
# on a clean tree every checker passes. Ends with "N passed, N failed".
set -u
LINT=$(cd "$(dirname "$0")/../../tools/lint" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/aas-lint-test.XXXXXX") || exit 2
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM

passed=0
failed=0

# check NAME TREE EXPECT COMMAND...: runs COMMAND in TREE; EXPECT is "pass"
# (exit 0, no output) or "fail" (exit 1). On failure every further line
# of stdin ("file:line") must start a line of the output, and no other
# line may name a file.
check() {
	name=$1 tree=$2 expect=$3
	shift 3
	out=$(cd "$T/$tree" && "$@" 2>&1)
	rc=$?
	want=$(cat)
	problem=""
	if [ "$expect" = pass ]; then
		[ $rc -eq 0 ] || problem="exit $rc, expected 0"
		[ -z "$out" ] || problem="${problem:+$problem; }unexpected output"
	else
		[ $rc -eq 1 ] || problem="exit $rc, expected 1"
		for w in $want; do
			printf '%s\n' "$out" | grep -q "^$w: " || problem="${problem:+$problem; }$w not named"
		done
		# Nothing else is reported: every "file:line:" is an expected one.
		# shellcheck disable=SC2086 # the lines of $want as words
		wanted=" $(printf '%s ' $want)"
		for got in $(printf '%s\n' "$out" | sed -n 's/^\([^ :]*:[0-9]*\): .*/\1/p' | sort -u); do
			case $wanted in
			*" $got "*) ;;
			*) problem="${problem:+$problem; }$got reported, not expected" ;;
			esac
		done
	fi
	if [ -z "$problem" ]; then
		passed=$((passed + 1))
		printf 'ok    %s\n' "$name"
	else
		failed=$((failed + 1))
		printf 'FAIL  %s: %s\n' "$name" "$problem"
		printf '%s\n' "$out" | sed 's/^/      /'
	fi
}

# put FILE: writes stdin to $T/FILE.
put() {
	mkdir -p "$(dirname "$T/$1")"
	cat >"$T/$1"
}

# ---- a tree with one fault of each kind ----

put bad/vmm/x.c <<'EOF'
/* x.c - the hypervisor layer reaching up. */
#include <stdio.h>
#include "sandbox/sandbox.h"
EOF
put bad/base/y.c <<'EOF'
/* y.c - the base layer reaching up. */
#include "server/http.h"
EOF
put bad/bridge/z.c <<'EOF'
/* z.c - an include that does not name its folder. */
#include "bridge/br_io.h"
#include "z.h"
EOF
put bad/base/calls.c <<'EOF'
/* calls.c - banned calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
calls(char *dst, const char *s)
{
	long n;

	strcpy(dst, s);
	sprintf(dst, "%s", s);
	n = atoi(s);
	n += strtol(s, NULL, 10);
	n += (long)strtoull(s + strlen("so long that the end pointer goes on the next line of it"),
	    NULL, 16);
	n += (long)strtod(s, (char **)NULL);
	return (int)n;
}
EOF
put bad/server/say.c <<'EOF'
/* say.c - formatting that is not checked. */
#include <stdarg.h>
#include <stdio.h>

void
say(char *dst, size_t n, const char *s, va_list ap)
{
	snprintf(dst, n, "%s", s);
	vsnprintf(dst, n, s, ap);
}
EOF
put bad/bench/fmt.c <<'EOF'
/* fmt.c - one line out of the house format. */
int
fmt(int a)
{
	return a;
}

int  fmt2(int b) { return b; }
EOF

check "layers: an include from above, from below a layer, without a folder" bad fail \
    sh "$LINT/layers.sh" <<'EOF'
vmm/x.c:3
base/y.c:2
bridge/z.c:3
EOF
check "banned: strcpy, sprintf, atoi, and strtol, strtoull, strtod with NULL" bad fail \
    sh "$LINT/banned.sh" <<'EOF'
base/calls.c:11
base/calls.c:12
base/calls.c:13
base/calls.c:14
base/calls.c:15
base/calls.c:17
EOF
check "format: a line out of the house format" bad fail sh "$LINT/format.sh" <<'EOF'
bench/fmt.c:8
EOF
check "fmt: snprintf and vsnprintf in production code" bad fail sh "$LINT/fmt.sh" server <<'EOF'
server/say.c:8
server/say.c:9
EOF
check "fmt: the old banned list is not checked" bad pass sh "$LINT/fmt.sh" base/calls.c </dev/null
check "banned: only the paths given" bad pass sh "$LINT/banned.sh" vmm bench </dev/null
check "banned: a path left out with !" bad pass sh "$LINT/banned.sh" base '!base/calls.c' </dev/null
check "format: only the paths given" bad pass sh "$LINT/format.sh" base vmm </dev/null
printf 'base\n!base/calls.c # not this one\n' >"$T/bad/list"
check "banned: paths from a list" bad pass sh "$LINT/banned.sh" -l list </dev/null

# ---- a clean tree ----

put good/base/y.c <<'EOF'
/* y.c - look-alikes of banned calls, in code, comments and strings. */
#include "base/y.h"

#include <stdio.h>
#include <stdlib.h>

/* strcpy(a, b) and atoi(s) are named here, in a comment. */
int
calls(char *dst, size_t n, const char *s, FILE *f)
{
	char *end;
	long long v = strtoll(s, &end, 10); // not atoi(s)
	unsigned long long u = strtoull(s, &end, 0);
	double d = strtod(s, &end);

	snprintf(dst, n, "sprintf(%s) strtol(x, NULL, 10)", s);
	my_strcpy_like(dst, s);
	if (fgets(dst, (int)n, f) == NULL || *end != '\0')
		return -1;
	return dst[0] == '"' ? (int)(v + (long long)u) : (int)d;
}
EOF
put good/base/y.h <<'EOF'
/* y.h - a header of the base layer. */
#include "base/err.h"

void my_strcpy_like(char *dst, const char *s);
EOF
put good/vmm/x.c <<'EOF'
/* x.c - the hypervisor layer on the base layer. */
#include "vmm/x.h"
#include "base/err.h"
EOF
put good/vmm/image/init.c <<'EOF'
/* init.c - a guest program, in the vmm layer. */
#include "vmm/guest.h"
EOF
put good/server/s.c <<'EOF'
/* s.c - the top layer includes from every layer below. */
#include "server/http.h"
#include "sandbox/sandbox.h"
#include "billing/price.h"
#include "vmm/vm.h"
#include "base/log.h"
EOF
put good/tests/unit/test_t.c <<'EOF'
/* test_t.c - tests sit outside the layers. */
#include "server/http.h"
#include "bridge/br_io.h"
EOF

put good/server/say.c <<'EOF'
/* say.c - formatting through the checked helper; snprintf(a, n, s) named
 * in a comment only. */
#include "base/fmt.h"

int
say(char *dst, size_t n, const char *s)
{
	return fmt_buf(dst, n, "snprintf(%s)", s);
}
EOF

check "layers: a clean tree" good pass sh "$LINT/layers.sh" </dev/null
check "fmt: a clean tree" good pass sh "$LINT/fmt.sh" server </dev/null
check "banned: a clean tree" good pass sh "$LINT/banned.sh" </dev/null
check "format: a clean tree" good pass sh "$LINT/format.sh" </dev/null

# ---- sizes: files up to 800 lines, functions up to 100 ----

# lines N: N lines of comment, a file of that size.
lines() {
	awk -v n="$1" 'BEGIN { for (i = 1; i <= n; i++) printf "/* line %d */\n", i }'
}

# fn NAME N: a function NAME whose lines from its "{" to its "}" are N
# (at least 5), after its return type and name (two lines).
fn() {
	awk -v name="$1" -v n="$2" 'BEGIN {
		printf "int\n%s(int a)\n{\n\tint n = a;\n\n", name
		for (i = 1; i <= n - 5; i++)
			print "\tn++;"
		printf "\treturn n;\n}\n"
	}'
}

lines 801 | put s801/base/long.c
check "size: a file of 801 lines" s801 fail sh "$LINT/size.sh" <<'EOF'
base/long.c:801
EOF

{ echo "/* fn.c - one function too long. */"; fn longest 101; } | put s101/vmm/fn.c
check "size: a function of 101 lines" s101 fail sh "$LINT/size.sh" <<'EOF'
vmm/fn.c:3
EOF

lines 850 | put sgrew/server/grew.c
lines 30 | put sgrew/server/split.c
{ echo "/* f.c - a listed function that grew. */"; fn grown 121; } | put sgrew/base/f.c
put sgrew/tools/lint/size-allow <<'EOF'
# what is still to split
server/grew.c 849
server/split.c 900
base/f.c:grown 120
base/f.c:gone 130
server/gone.c 1000
EOF
check "size: a listed file and function grown, three stale lines" sgrew fail \
    sh "$LINT/size.sh" <<'EOF'
server/grew.c:801
base/f.c:3
tools/lint/size-allow:3
tools/lint/size-allow:5
tools/lint/size-allow:6
EOF

lines 800 | put sok/base/edge.c
{ echo "/* fn.c - functions at the limit and below. */"; fn edge 100; echo; fn short 5; } |
    put sok/bridge/fn.c
lines 900 | put sok/service/listed.c
{ echo "/* f.c - a listed function, shorter than listed. */"; fn listed 115; } | put sok/service/f.c
lines 900 | put sok/tests/unit/test_big.c
{ lines 900; fn bench_long 150; } | put sok/bench/b.c
put sok/tools/lint/size-allow <<'EOF'
service/listed.c 900 # splits soon
service/f.c:listed 120
EOF
check "size: 800 and 100 lines, listed ones, tests/ and bench/ pass" sok pass \
    sh "$LINT/size.sh" </dev/null

# ---- prefixes: one per file, from its name; one folder per prefix ----

put pwrong/base/ring.c <<'EOF'
/* ring.c - one function without the file's prefix. */
struct ring *
ring_new(int n)
{
	return 0;
}

int
rng_put(struct ring *r,
    int v)
{
	return v;
}
EOF
check "prefix: a function without its file's prefix" pwrong fail sh "$LINT/prefix.sh" <<'EOF'
base/ring.c:9
EOF

put players/base/meter.c <<'EOF'
/* meter.c - meter_ in base/. */
int
meter_count(void)
{
	return 0;
}
EOF
put players/server/meter_http.c <<'EOF'
/* meter_http.c - meter_ in server/ too. */
void
meter_http_handle(void)
{
}
EOF
check "prefix: one prefix in two layers, undocumented" players fail sh "$LINT/prefix.sh" <<'EOF'
base/meter.c:3
server/meter_http.c:3
EOF

cp -R "$T/players" "$T/pstale"
put pstale/tools/lint/prefixes <<'EOF'
# the exceptions
base/r*.c rg_ no function needs this
base+vmm+server meter_ vmm/ has no meter_ function
service/x.c
base+server meter_ listed twice
EOF
check "prefix: stale lines, a line without a reason, a prefix listed twice" pstale fail \
    sh "$LINT/prefix.sh" <<'EOF'
tools/lint/prefixes:2
tools/lint/prefixes:3
tools/lint/prefixes:4
tools/lint/prefixes:5
EOF

cp -R "$T/players" "$T/pok"
put pok/tools/lint/prefixes <<'EOF'
# the exceptions, each with its reason
service/sandbox*.c sbx_ the sandbox service's module prefix
base+server meter_ the meter and its endpoint
EOF
put pok/service/sandbox_io.c <<'EOF'
/* sandbox_io.c - a documented prefix, the file's own, a static helper. */
static int
helper(void)
{
	return 0;
}

int
sbx_run(void)
{
	return helper();
}

int
sandbox_io_count(void)
{
	return 0;
}
EOF
put pok/service/sandbox.c <<'EOF'
/* sandbox.c - the file's own word, main(). */
static int sandbox_helper(void)
{
	return 0;
}

void
sandbox(void)
{
}

int
main(void)
{
	return sandbox_helper();
}
EOF
put pok/vmm/image/aas-agent.c <<'EOF'
/* aas-agent.c - a name with "-". */
const char *
aas_version(void)
{
	return "1";
}
EOF
put pok/tools/fuzz_x.c <<'EOF'
/* fuzz_x.c - a fuzz harness. */
int
LLVMFuzzerTestOneInput(const unsigned char *data, unsigned long size)
{
	return data == 0 || size == 0;
}
EOF
put pok/tests/unit/test_x.c <<'EOF'
/* test_x.c - tests are not checked. */
int
__wrap_meter_count(void)
{
	return 1;
}
EOF
put pok/build/gen.c <<'EOF'
/* gen.c - generated, not checked. */
int
other_gen(void)
{
	return 0;
}
EOF
check "prefix: own prefixes, documented exceptions, what is not checked" pok pass \
    sh "$LINT/prefix.sh" </dev/null

# ---- fallible functions: the compiler checks their callers ----

put mbad/base/x.h <<'EOF'
/* x.h - three fallible functions, one unmarked. */
int x_open(const char *path, struct err *e) AAS_MUST_CHECK;
int x_read(char *buf, unsigned long n,
    struct err *e);
int x_fail(struct err *e) AAS_FAILS;
EOF
put mbad/sandbox/y.h <<'EOF'
/* y.h - a long one, unmarked. */
void y_free(struct y *y);
int y_count(void);
int y_put(struct y *y, const char *key, const char *value, unsigned long len,
    int flags, struct err *e);
EOF
check "mustcheck: int and struct err * without AAS_MUST_CHECK" mbad fail \
    sh "$LINT/mustcheck.sh" <<'EOF'
base/x.h:3
sandbox/y.h:4
EOF

put mok/base/x.h <<'EOF'
/* x.h - marked, or not fallible that way. */
int x_open(const char *path, struct err *e) AAS_MUST_CHECK;
int x_put(const char *key, const char *value,
    struct err *e) AAS_MUST_CHECK;
int x_fail(struct err *e) AAS_FAILS;
int x_count(void);
void x_clear(struct err *e);
EOF
put mok/tests/unit/t.h <<'EOF'
/* t.h - test headers are not checked. */
int t_run(struct err *e);
EOF
check "mustcheck: marked, helpers, other returns, tests/ pass" mok pass \
    sh "$LINT/mustcheck.sh" </dev/null

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
