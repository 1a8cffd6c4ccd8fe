# lib.sh - what the lint checks share; sourced, not run.
#
# The folders of project C code, lowest layer first. vmm/image (the guest's
# own programs) is inside vmm/.
LINT_DIRS="base vmm billing account sandbox service server bridge tests/unit bench tools"

# lint_files [-l LIST] [PATH...]
# Prints the C files (*.c, *.h) the PATHs name, one a line, sorted: a file,
# or every such file under a folder. A PATH starting with "!" leaves out
# what it names (a file, a folder or a shell pattern: "!server/rest*").
# -l LIST reads more PATHs from the file LIST, one a line ("#" starts a
# comment). With no PATH at all: every folder in LINT_DIRS that exists.
lint_files() {
	_lf_paths=""
	while [ $# -gt 0 ]; do
		case $1 in
		-l)
			[ -f "${2:-}" ] || { echo "lint: no list file '${2:-}'" >&2; return 2; }
			_lf_paths="$_lf_paths $(sed -e 's/#.*//' "$2")"
			shift 2
			;;
		*)
			_lf_paths="$_lf_paths $1"
			shift
			;;
		esac
	done
	_lf_in=""
	_lf_out=""
	set -f # patterns in "!" paths are matched below, not expanded here
	for p in $_lf_paths; do
		case $p in
		!*) _lf_out="$_lf_out ${p#!}" ;;
		*) _lf_in="$_lf_in $p" ;;
		esac
	done
	set +f
	if [ -z "$_lf_in" ]; then
		for d in $LINT_DIRS; do
			[ -d "$d" ] && _lf_in="$_lf_in $d"
		done
	fi
	for p in $_lf_in; do
		[ -e "$p" ] || { echo "lint: no such file or folder '$p'" >&2; return 2; }
	done
	for p in $_lf_in; do
		p=${p%/}
		if [ -d "$p" ]; then
			find "$p" -type f \( -name '*.c' -o -name '*.h' \)
		else
			echo "$p"
		fi
	done | sed 's|^\./||' | sort -u | while IFS= read -r f; do
		set -f
		for x in $_lf_out; do
			x=${x%/}
			# shellcheck disable=SC2254 # x is a pattern on purpose
			case $f in
			$x | $x/*) f="" && break ;;
			esac
		done
		set +f
		[ -z "$f" ] || echo "$f"
	done
}

# lint_scan FILE...
# What the size and prefix checks read of C files, one record a line:
#   file PATH LINES
#   def PATH OPEN CLOSE AT LINKAGE NAME
# A definition is found the house style's way: its opening "{" alone at
# column 0, its closing "}" the next line starting at column 0 (OPEN and
# CLOSE, the function is CLOSE - OPEN + 1 lines). Its declarator is the
# nearest line above the "{" starting at column 0 (the parameters may
# continue on indented lines): NAME is the last word before its first "(",
# AT its line. LINKAGE is "static" when the return type says so (before
# the name on that line, or the line above when the name starts it), else
# "extern".
lint_scan() {
	awk '
	FNR == 1 {
		if (NR > 1)
			printf "file %s %d\n", path, n
		path = FILENAME
		open = 0
	}
	{
		n = FNR
		line[FNR] = $0
	}
	/^\{/ {
		open = FNR
		at = FNR - 1
		while (at > 0 && line[at] !~ /^[^ \t]/)
			at--
		head = ""
		if (at > 0 && index(line[at], "(") > 0)
			head = substr(line[at], 1, index(line[at], "(") - 1)
		sub(/[ \t]+$/, "", head)
		name = head
		sub(/.*[^A-Za-z0-9_]/, "", name)
		type = head
		if (name == head && at > 1)
			type = line[at - 1]
		linkage = "extern"
		if (type ~ /(^|[^A-Za-z0-9_])static([^A-Za-z0-9_]|$)/)
			linkage = "static"
		next
	}
	/^\}/ && open > 0 {
		if (name != "")
			printf "def %s %d %d %d %s %s\n", path, open, FNR, at, linkage, name
		open = 0
	}
	END {
		if (NR > 0)
			printf "file %s %d\n", path, n
	}
	' "$@"
}
