#!/bin/sh
# banned.sh - fails on calls the house rules ban in C code:
#   strcpy, strcat, sprintf, vsprintf, gets  (no bound: snprintf, memcpy)
#   atoi, atol, atoll                         (no error: strtol with a check)
#   strtol, strtoll, strtoul, strtoull, strtod, strtof, strtoimax,
#   strtoumax with NULL (or 0) as the end pointer: nothing can check that
#   the whole text was a number.
# Comments and string literals are ignored; a call may span lines.
#
#   tools/lint/banned.sh [-c "CALL..." -w WHY] [-l LIST] [PATH...]
#
# PATHs are files or folders ("!path" leaves one out; see lib.sh); none
# means every project folder. Prints "file:line: ..." for each call found.
# -c bans the CALLs named instead of the list above (and checks no strto*
# end pointer); -w says, after "CALL() is banned", what to use instead.
set -u
. "$(dirname "$0")/lib.sh"

calls="strcpy strcat sprintf vsprintf gets atoi atol atoll"
strto="strtol strtoll strtoul strtoull strtod strtof strtoimax strtoumax"
why=""
while [ $# -gt 0 ]; do
	case $1 in
	-c) calls=${2:?banned.sh: -c needs a list}; strto=""; shift 2 ;;
	-w) why=": ${2:?banned.sh: -w needs a text}"; shift 2 ;;
	*) break ;;
	esac
done

files=$(lint_files "$@") || exit 2
[ -n "$files" ] || exit 0

# shellcheck disable=SC2086 # one word per file
awk -v calls="$calls" -v strtos="$strto" -v why="$why" '
BEGIN {
	split(calls, b, " ")
	for (i in b)
		banned[b[i]] = 1
	split(strtos, b, " ")
	for (i in b)
		strto[b[i]] = 1
	bad = 0
}

FNR == 1 {
	if (NR > 1)
		check(file)
	file = FILENAME
	n = 0
	state = 0 # 0 code, 1 /* comment */, 3 string, 4 character constant
}

# Keeps the line as written and a copy with comments and literals blanked.
{
	n++
	orig[n] = $0
	clean[n] = blank($0)
}

END {
	if (NR > 0)
		check(file)
	exit bad
}

function blank(s,    out, i, c, d, len) {
	out = ""
	len = length(s)
	for (i = 1; i <= len; i++) {
		c = substr(s, i, 1)
		d = substr(s, i, 2)
		if (state == 1) {
			if (d == "*/") {
				state = 0
				out = out "  "
				i++
			} else
				out = out " "
		} else if (state == 3 || state == 4) {
			if (c == "\\") {
				out = out "  "
				i++
			} else if ((state == 3 && c == "\"") || (state == 4 && c == "\047")) {
				state = 0
				out = out c
			} else
				out = out " "
		} else if (d == "/*") {
			state = 1
			out = out "  "
			i++
		} else if (d == "//") {
			break
		} else {
			if (c == "\"")
				state = 3
			else if (c == "\047")
				state = 4
			out = out c
		}
	}
	# A literal never spans lines (no backslash continuations here).
	if (state == 3 || state == 4)
		state = 0
	return out
}

function report(line, msg,    t) {
	t = orig[line]
	sub(/^[ \t]+/, "", t)
	printf "%s:%d: %s: %s\n", file, line, msg, t
	bad = 1
}

# The text of the argument list that opens at line l, column c (just after
# the "("), through up to 20 lines.
function args_from(l, c,    s, k) {
	s = substr(clean[l], c)
	for (k = l + 1; k <= n && k <= l + 20; k++)
		s = s "\n" clean[k]
	return s
}

# The second argument of a call whose argument text is s, without
# surrounding blanks; "" when there is none.
function second_arg(s,    i, c, depth, argn, a, len) {
	depth = 0
	argn = 1
	a = ""
	len = length(s)
	for (i = 1; i <= len; i++) {
		c = substr(s, i, 1)
		if (c == "(" || c == "[" || c == "{")
			depth++
		else if (c == ")" || c == "]" || c == "}") {
			if (depth == 0)
				break
			depth--
		} else if (c == "," && depth == 0) {
			if (argn == 2)
				break
			argn++
			continue
		}
		if (argn == 2)
			a = a c
	}
	gsub(/[ \t\n]+/, "", a)
	return a
}

function check(f,    l, s, off, name, at, a) {
	for (l = 1; l <= n; l++) {
		s = clean[l]
		off = 0
		while (match(s, /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
			name = substr(s, RSTART, RLENGTH - 1)
			sub(/[ \t]+$/, "", name)
			at = off + RSTART + RLENGTH # column just after the "("
			if (name in banned)
				report(l, name "() is banned" why)
			else if (name in strto) {
				a = second_arg(args_from(l, at))
				sub(/^\((char|void)\*+\)/, "", a) # a cast: (char **)NULL
				if (a == "NULL" || a == "0" || a == "((void*)0)")
					report(l, name "() with a NULL end pointer leaves the number unchecked")
			}
			off += RSTART + length(name) - 1
			s = substr(clean[l], off + 1)
		}
	}
}
' $files
