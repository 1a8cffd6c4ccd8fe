#!/bin/sh
# mustcheck.sh - fails when a header declares a function that can fail
# without making the compiler check its callers: every prototype at column
# 0 that returns int and takes a `struct err *` carries AAS_MUST_CHECK
# (base/err.h: warn_unused_result), or AAS_FAILS when it is a helper that
# always returns -1 for its caller to pass on.
#
#   tools/lint/mustcheck.sh [ROOT]     checks ROOT (default: .)
#
# Headers of the project folders outside tests/, bench/ and tools/.
# Prints "file:line: ..." for each declaration at fault.
set -u
. "$(dirname "$0")/lib.sh"
ROOT=${1:-.}
cd "$ROOT" || exit 2

files=$(lint_files '!tests' '!bench' '!tools') || exit 2
files=$(printf '%s\n' "$files" | grep '\.h$')
[ -n "$files" ] || exit 0

# shellcheck disable=SC2086 # one word per file
awk '
BEGIN { bad = 0 }

FNR == 1 { decl = "" }

decl == "" && /^int [a-z_][a-z0-9_]*\(/ {
	decl = $0
	at = FNR
	if (decl !~ /[;{]/)
		next
}

decl != "" && FNR != at { decl = decl " " $0 }

decl != "" && /[;{]/ {
	if (decl ~ /;/ && decl ~ /struct err \*/ && decl !~ /AAS_MUST_CHECK/ &&
	    decl !~ /AAS_FAILS/) {
		name = decl
		sub(/^int /, "", name)
		sub(/\(.*/, "", name)
		printf "%s:%d: %s() can fail (int, struct err *) but lacks AAS_MUST_CHECK\n",
		    FILENAME, at, name
		bad = 1
	}
	decl = ""
}

END { exit bad }
' $files
