#!/bin/sh
# prefix.sh - fails when a function's prefix does not say where it lives:
# one prefix per file, matching its name, and one top-level folder per
# prefix.
#
#   tools/lint/prefix.sh [ROOT]     checks ROOT (default: .)
#
# The rules, on every function with external linkage (a definition at
# column 0 without "static"; see lint_scan in lib.sh) in the *.c files of
# the project folders outside tests/ and bench/; main() and
# LLVMFuzzerTestOneInput() are not checked, nor what is generated under
# build/ (no project folder).
#  1. A function defined in DIR/NAME.c starts with NAME's prefix: NAME up
#     to its first "_" or "-", then "_" (http.c: http_; sandbox_io.c:
#     sandbox_; aas-agent.c: aas_), or is that word itself (http()).
#  2. A function's prefix (its name up to its first "_") is defined in
#     one top-level folder only (vmm/image is vmm): tool_ in base/ and in
#     service/ is two modules under one name.
# ROOT/tools/lint/prefixes lists the exceptions, one a line ("#" starts a
# comment line), each with its reason:
#   PATTERN PREFIX REASON        rule 1: the files the shell PATTERN names
#                                (a path: "service/sandbox*.c") may define
#                                functions starting with PREFIX
#   FOLDER+FOLDER PREFIX REASON  rule 2: PREFIX is defined in exactly
#                                these top-level folders
# A line nothing needs any more fails as stale, so the list only shrinks.
# Prints "file:line: ..." for each fault.
set -u
. "$(dirname "$0")/lib.sh"
ROOT=${1:-.}
cd "$ROOT" || exit 2
TABLE=tools/lint/prefixes
[ -f "$TABLE" ] || TABLE=/dev/null

files=$(lint_files '!tests' '!bench') || exit 2
files=$(printf '%s\n' "$files" | grep '\.c$')
[ -n "$files" ] || files=/dev/null

# shellcheck disable=SC2086 # one word per file
lint_scan $files | awk -v table="$TABLE" -v tname=tools/lint/prefixes '
BEGIN {
	bad = 0
	nfile = 0 # rule 1 lines: fpat[i], fpre[i], fat[i], fused[i]
}

function report(where, msg) {
	printf "%s: %s\n", where, msg
	bad = 1
}

# A shell pattern as a regular expression: * and ? stay within a folder.
function glob_re(g,    r, i, c) {
	r = "^"
	for (i = 1; i <= length(g); i++) {
		c = substr(g, i, 1)
		if (c == "*")
			r = r "[^/]*"
		else if (c == "?")
			r = r "[^/]"
		else if (index(".+()|^$\\{}", c) > 0)
			r = r "\\" c
		else
			r = r c
	}
	return r "$"
}

# The prefix of a name: up to its first "_" (the name and "_" without one).
function prefix_of(name) {
	if (index(name, "_") == 0)
		return name "_"
	return substr(name, 1, index(name, "_"))
}

FILENAME == table {
	if ($0 ~ /^[ \t]*(#|$)/)
		next
	if (NF < 3 || $2 !~ /^[A-Za-z][A-Za-z0-9_]*_$/) {
		report(table ":" FNR, "not \"PATTERN PREFIX REASON\" or \"FOLDER+FOLDER PREFIX REASON\"")
		next
	}
	if ($1 ~ /\//) {
		nfile++
		fpat[nfile] = glob_re($1)
		fpre[nfile] = $2
		fat[nfile] = FNR
		ftext[nfile] = $1 " " $2
		fused[nfile] = 0
		next
	}
	if ($1 !~ /^[a-z][a-z0-9]*(\+[a-z][a-z0-9]*)+$/ || $2 != prefix_of($2)) {
		report(table ":" FNR, "not \"FOLDER+FOLDER PREFIX REASON\" (folders joined by +, a prefix up to its first _)")
		next
	}
	if ($2 in lfolders) {
		report(table ":" FNR, $2 " is listed twice (line " lat[$2] ")")
		next
	}
	lfolders[$2] = "+" $1 "+"
	lat[$2] = FNR
	next
}

$1 == "def" && $6 == "extern" && $7 != "main" && $7 != "LLVMFuzzerTestOneInput" {
	path = $2
	name = $7
	where = path ":" $5

	# Rule 1: the file name, or a line of the table.
	own = path
	sub(/.*\//, "", own)
	sub(/\.c$/, "", own)
	sub(/[-_].*/, "", own)
	if (name != own && index(name, own "_") != 1) {
		ok = 0
		for (i = 1; i <= nfile; i++) {
			if (path ~ fpat[i] && index(name, fpre[i]) == 1) {
				fused[i] = 1
				ok = 1
			}
		}
		if (!ok)
			report(where, name "() does not start with " own "_, the prefix of its file, " \
			    "and no line of " tname " allows it")
	}

	# Rule 2: where each prefix is defined, the first definition per folder.
	p = prefix_of(name)
	top = path
	sub(/\/.*/, "", top)
	if (!((p, top) in first)) {
		first[p, top] = where
		folders[p] = folders[p] " " top
		nfolders[p]++
	}
}

END {
	for (i = 1; i <= nfile; i++)
		if (!fused[i])
			report(table ":" fat[i], "stale: no function needs \"" ftext[i] \
			    "\" any more; remove the line")
	for (p in folders) {
		if (nfolders[p] < 2)
			continue
		n = split(substr(folders[p], 2), f, " ")
		list = ""
		for (i = 1; i <= n; i++)
			list = list (i == 1 ? "" : i == n ? " and " : ", ") f[i] "/"
		for (i = 1; i <= n; i++) {
			if (!(p in lfolders))
				report(first[p, f[i]], p " is defined in " list ": one prefix " \
				    "belongs to one folder (or " tname " says why)")
			else if (index(lfolders[p], "+" f[i] "+") == 0)
				report(first[p, f[i]], p " is defined in " f[i] "/ too, a folder " \
				    table ":" lat[p] " does not list")
		}
	}
	for (p in lfolders) {
		n = split(substr(lfolders[p], 2, length(lfolders[p]) - 2), f, "+")
		for (i = 1; i <= n; i++)
			if (!((p, f[i]) in first))
				report(table ":" lat[p], "stale: no " p " function is defined in " \
				    f[i] "/ any more; remove it from the line")
	}
	exit bad
}
' "$TABLE" -
