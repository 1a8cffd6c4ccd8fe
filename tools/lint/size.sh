#!/bin/sh
# size.sh - fails on a C file (*.c, *.h) over 800 lines or a function over
# 100 lines, outside tests/ and bench/: a file is one idea, a function
# reads in one screen. A function counts from its opening "{" at column 0
# to its closing "}" at column 0, both included (the house style; see
# lint_scan in lib.sh).
#
#   tools/lint/size.sh [ROOT]     checks ROOT (default: .)
#
# ROOT/tools/lint/size-allow lists the violators that are still to split,
# one a line: "path LINES" for a file, "path:function LINES" for a
# function, LINES its size when it was listed ("#" starts a comment). A
# listed violator passes while it stays at most that size. The list can
# only shrink: a line whose file or function is no longer over its limit
# (or no longer exists) fails as stale, and so does a violator grown past
# its line. Prints "file:line: ..." for each fault.
set -u
. "$(dirname "$0")/lib.sh"
ROOT=${1:-.}
cd "$ROOT" || exit 2
ALLOW=tools/lint/size-allow
[ -f "$ALLOW" ] || ALLOW=/dev/null

files=$(lint_files '!tests' '!bench') || exit 2
[ -n "$files" ] || files=/dev/null

# shellcheck disable=SC2086 # one word per file
lint_scan $files | awk -v allow="$ALLOW" '
BEGIN {
	FILE_MAX = 800
	FUNC_MAX = 100
	bad = 0
}

function report(where, msg) {
	printf "%s: %s\n", where, msg
	bad = 1
}

FILENAME == allow {
	sub(/#.*/, "")
	if (NF == 0)
		next
	if (NF != 2 || $2 !~ /^[0-9]+$/) {
		report(allow ":" FNR, "not \"path LINES\" or \"path:function LINES\"")
		next
	}
	if ($1 in allowed) {
		report(allow ":" FNR, $1 " is listed twice (line " at[$1] ")")
		next
	}
	allowed[$1] = $2
	at[$1] = FNR
	next
}

# over(key, size, limit, where, what): checks one file or function.
function over(key, size, limit, where, what) {
	now[key] = size
	if (size <= limit)
		return
	if (!(key in allowed))
		report(where, what " has " size " lines, over " limit)
	else if (size > allowed[key])
		report(where, what " has " size " lines, over " limit " and over the " \
		    allowed[key] " of " allow ":" at[key])
}

$1 == "file" {
	over($2, $3, FILE_MAX, $2 ":" (FILE_MAX + 1), "the file")
}

$1 == "def" {
	over($2 ":" $7, $4 - $3 + 1, FUNC_MAX, $2 ":" $5, $7 "()")
}

END {
	for (key in allowed) {
		limit = key ~ /:/ ? FUNC_MAX : FILE_MAX
		if (!(key in now))
			report(allow ":" at[key], "stale: " key " no longer exists; remove the line")
		else if (now[key] <= limit)
			report(allow ":" at[key], "stale: " key " has " now[key] \
			    " lines, no longer over " limit "; remove the line")
	}
	exit bad
}
' "$ALLOW" -
