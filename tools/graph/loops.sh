#!/bin/sh
# loops.sh - prints the loops among C files: groups of files that call
# into each other in a circle, which keeps them from being read, tested or
# split one at a time. A build-time measure, not part of aasd.
#
#   tools/graph/loops.sh [-v] [PATH...]
#
# PATHs are folders or files (see lint_files in tools/lint/lib.sh; "!path"
# leaves one out); with none, the production tree: base vmm billing
# account sandbox service server bridge. Only *.c files count.
#
# File A "calls into" file B when A names a function with external linkage
# that B defines (a call or its address; found the house style's way, see
# lint_scan) and A does not define a function of that name itself; a name
# after "." or "->" is a member, not a function. A name defined in more
# than one file (main, the guest's own programs) goes to the definition in
# the caller's top-level folder when there is exactly one, else nowhere.
# Each strongly connected component of that graph with more than one file
# is a loop, printed as
#   loop N (K files): FILE FILE ...
# and, with -v, the edges inside it ("  A -> B: fn fn ..."). The last line
# counts them: "loops: N (M files)".
set -u
. "$(dirname "$0")/../lint/lib.sh"

verbose=0
if [ "${1:-}" = -v ]; then
	verbose=1
	shift
fi
[ $# -gt 0 ] || set -- base vmm billing account sandbox service server bridge
files=$(lint_files "$@") || exit 2
files=$(printf '%s\n' "$files" | grep '\.c$')
if [ -z "$files" ]; then
	echo "loops: 0 (0 files)"
	exit 0
fi
defs=$(mktemp "${TMPDIR:-/tmp}/aas-loops.XXXXXX") || exit 2
trap 'rm -f "$defs"' EXIT
# shellcheck disable=SC2086 # one word per file
lint_scan $files >"$defs" || exit 2

# shellcheck disable=SC2086 # one word per file
awk -v defs="$defs" -v verbose="$verbose" '
function top(path) {
	sub(/\/.*/, "", path)
	return path
}

# The file defining `name` for a caller in `file`, or "".
function definer(name, file,    k, hit, d) {
	if (ndef[name] == 1)
		return def[name, 1]
	hit = ""
	for (k = 1; k <= ndef[name]; k++) {
		d = def[name, k]
		if (top(d) == top(file)) {
			if (hit != "")
				return ""
			hit = d
		}
	}
	return hit
}

function edge(a, b, name) {
	if (!((a, b) in used)) {
		used[a, b] = name
		succ[a, ++nsucc[a]] = b
	} else if (index(" " used[a, b] " ", " " name " ") == 0)
		used[a, b] = used[a, b] " " name
}

# Tarjan: the components, each numbered in comp[] as it closes.
function visit(v,    k, w) {
	index_of[v] = low[v] = ++counter
	stack[++sp] = v
	on[v] = 1
	for (k = 1; k <= nsucc[v]; k++) {
		w = succ[v, k]
		if (!(w in index_of)) {
			visit(w)
			if (low[w] < low[v])
				low[v] = low[w]
		} else if (on[w] && index_of[w] < low[v])
			low[v] = index_of[w]
	}
	if (low[v] == index_of[v]) {
		ncomp++
		do {
			w = stack[sp--]
			on[w] = 0
			comp[w] = ncomp
			size[ncomp]++
		} while (w != v)
	}
}

FILENAME == defs {
	if ($1 == "file") {
		node[++nnode] = $2
	} else if ($1 == "def") {
		local[$2, $7] = 1
		if ($6 == "extern")
			def[$7, ++ndef[$7]] = $2
	}
	next
}

FNR == 1 {
	incomment = 0
}

{
	# Comments, strings and character constants name no function.
	s = $0
	out = ""
	while (s != "") {
		if (incomment) {
			k = index(s, "*/")
			if (k == 0) {
				s = ""
				break
			}
			s = substr(s, k + 2)
			incomment = 0
			continue
		}
		if (match(s, /\/\*|\/\/|"|\047/) == 0) {
			out = out s
			break
		}
		out = out substr(s, 1, RSTART - 1) " "
		tok = substr(s, RSTART, RLENGTH)
		s = substr(s, RSTART + RLENGTH)
		if (tok == "//")
			break
		if (tok == "/*") {
			incomment = 1
			continue
		}
		# A string or character constant up to its unescaped end.
		while (s != "" && substr(s, 1, 1) != tok)
			s = substr(s, (substr(s, 1, 1) == "\\") ? 3 : 2)
		s = substr(s, 2)
	}
	gsub(/(->|\.)[ \t]*[A-Za-z_][A-Za-z0-9_]*/, " ", out)
	n = split(out, word, /[^A-Za-z0-9_]+/)
	for (i = 1; i <= n; i++) {
		w = word[i]
		if (!(w in ndef) || ((FILENAME, w) in local))
			continue
		to = definer(w, FILENAME)
		if (to != "" && to != FILENAME)
			edge(FILENAME, to, w)
	}
}

END {
	for (i = 1; i <= nnode; i++)
		if (!(node[i] in index_of))
			visit(node[i])
	loops = 0
	inloops = 0
	# In file order, so the output is stable.
	for (i = 1; i <= nnode; i++) {
		c = comp[node[i]]
		if (size[c] < 2 || (c in printed))
			continue
		printed[c] = 1
		loops++
		inloops += size[c]
		line = ""
		for (j = i; j <= nnode; j++)
			if (comp[node[j]] == c)
				line = line " " node[j]
		printf "loop %d (%d files):%s\n", loops, size[c], line
		if (!verbose)
			continue
		for (j = i; j <= nnode; j++) {
			a = node[j]
			if (comp[a] != c)
				continue
			for (k = 1; k <= nsucc[a]; k++)
				if (comp[succ[a, k]] == c)
					printf "  %s -> %s: %s\n", a, succ[a, k], used[a, succ[a, k]]
		}
	}
	printf "loops: %d (%d files)\n", loops, inloops
}
' "$defs" $files
