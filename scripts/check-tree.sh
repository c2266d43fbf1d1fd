#!/usr/bin/env bash
# Fails when the tracked tree holds what a release must not ship:
#  - a replace directive in a go.mod: `go install ...@version` refuses a
#    module whose go.mod has one, and a path replace points at the author's
#    disk (local builds get the same effect from go.work);
#  - a compiled binary (ELF, Mach-O, PE) or any file over 1 MB;
#  - a file or folder of the design card's layout missing;
#  - a module other than the root importing the library's internal/
#    packages: a released binary would then depend on code that may change
#    in any version (tools use the public packages, e.g. redlock/admin).
#  - more exported symbols in the root package than its budget (symbols).
#  - a relative link in README.md, SAFETY.md or docs/*.md to a file that is
#    not tracked, or to a heading (#anchor) that the linked page lacks;
#  - a README.md of more than 300 lines: it is the page a newcomer reads
#    first, the depth belongs in docs/.
# It reads the index (what the next commit holds), so it needs only git, od;
# the symbol count alone reads the working tree's Go files, with go.
set -euo pipefail
cd "$(dirname "$0")/.."

max=$((1024 * 1024))
# symbols is the root package's budget of exported symbols (types, funcs,
# methods, consts, vars; scripts/docstats.sh counts them): a newcomer reads
# its whole index. What only observes the library goes to package observe.
symbols=80
fail=0

if out=$(git grep --cached -n -E '^[[:space:]]*replace([[:space:]]|\()' -- '*go.mod'); then
	echo "check-tree: replace directive in a go.mod (use go.work for local builds):"
	echo "$out"
	fail=1
fi

# magic names the binary format of a file's first 4 bytes (hex), or nothing.
magic() {
	case "$1" in
	7f454c46) echo ELF ;;
	feedface | feedfacf | cefaedfe | cffaedfe | cafebabe) echo Mach-O ;;
	4d5a*) echo PE ;;
	esac
}

# Sizes of the index's blobs in one git process; submodule entries
# (mode 160000) have no blob.
while read -r size path; do
	if [ "$size" -gt "$max" ]; then
		echo "check-tree: $path is $size bytes (limit $max)"
		fail=1
	fi
done < <(git ls-files -s |
	awk -F'\t' '{ split($1, m, " "); if (m[1] != "160000") print m[2] " " $2 }' |
	git cat-file --batch-check='%(objectsize) %(rest)')

# Only files git sees as non-text in the index can be executables; their
# first 4 bytes name the format.
while IFS=$'\t' read -r _ path; do
	# head closes the pipe early: cat-file's SIGPIPE is expected.
	head4=$(git cat-file blob ":$path" | head -c 4 | od -An -tx1 | tr -d ' \n') || true
	kind=$(magic "$head4")
	if [ -n "$kind" ]; then
		echo "check-tree: $path is an executable ($kind)"
		fail=1
	fi
done < <(git ls-files --eol | grep '^i/-text')

# Only the root module may import its internal/ packages (Go allows every
# module under its path to). integration/ is exempt: it tests the internal
# packages against real servers, and it is never released.
for mod in $(git ls-files --cached '*/go.mod' | sed 's|/go.mod$||'); do
	[ "$mod" = integration ] && continue
	if out=$(git grep --cached -n -F '"github.com/redlock-go/redlock/internal/' -- "$mod/*.go"); then
		echo "check-tree: module $mod imports the library's internal packages (use the public ones, e.g. github.com/redlock-go/redlock/admin):"
		echo "$out"
		fail=1
	fi
done

# The top-level layout the design card names stays where it says.
for want in go.mod redlock.go drift.go clock internal/quorum internal/node integration docker-compose.yml README.md; do
	if ! git ls-files --error-unmatch "$want" >/dev/null 2>&1 && [ -z "$(git ls-files "$want/" | head -1)" ]; then
		echo "check-tree: $want is missing (the design card's layout: go.mod, redlock.go, drift.go, clock/, quorum, node, integration/, docker-compose.yml, README.md)"
		fail=1
	fi
done

have=$(scripts/docstats.sh -count .)
if [ "$have" -gt "$symbols" ]; then
	echo "check-tree: the root package exports $have symbols, over its budget of $symbols (scripts/docstats.sh lists them by kind): move what only observes the library to package observe, or raise the budget in scripts/check-tree.sh"
	fail=1
fi

# anchors prints the anchors GitHub makes of a markdown file's headings
# (outside fenced code): lower case, punctuation but - and _ dropped,
# spaces as -, a repeated one suffixed -1, -2, ...
anchors() {
	git cat-file blob ":$1" | LC_ALL=C awk '
		/^[ \t]*```/ { code = !code; next }
		code || !/^#+[ \t]/ { next }
		{
			s = tolower($0); sub(/^#+[ \t]+/, "", s); sub(/[ \t#]+$/, "", s)
			gsub(/[!-,.\/:-@[-^`{-~]/, "", s); gsub(/ /, "-", s)
			if (seen[s]++) s = s "-" (seen[s] - 1)
			print s
		}'
}

# tracked says whether a path (a file or a folder) is in the index.
tracked() {
	git ls-files --error-unmatch "$1" >/dev/null 2>&1 || [ -n "$(git ls-files "$1/" | head -1)" ]
}

# Relative links of the user docs: each target is tracked and, with an
# #anchor into a markdown file, that file has the heading.
while read -r doc; do
	dir=$(dirname "$doc")
	while read -r link; do
		target=${link%%#*}
		anchor=""
		[ "$target" != "$link" ] && anchor=${link#*#}
		if [ -z "$target" ]; then
			path=$doc
		else
			path=$(realpath -m --relative-to=. "$dir/$target")
		fi
		if ! tracked "$path"; then
			echo "check-tree: $doc links to $link: $path is not tracked"
			fail=1
		elif [ -n "$anchor" ] && [[ $path == *.md ]] && ! anchors "$path" | grep -qxF -- "$anchor"; then
			echo "check-tree: $doc links to $link: $path has no heading #$anchor"
			fail=1
		fi
	done < <(git cat-file blob ":$doc" |
		awk '/^[ \t]*```/ { code = !code; next } !code' |
		grep -oE '\]\([^)[:space:]]+\)' | sed -E 's/^\]\((.*)\)$/\1/' |
		grep -vE '^(https?|mailto):' || true)
done < <(git ls-files README.md SAFETY.md 'docs/*.md' | grep -vE '^docs/.+/')

readme_max=300
if lines=$(git cat-file blob :README.md 2>/dev/null | wc -l) && [ "$lines" -gt "$readme_max" ]; then
	echo "check-tree: README.md has $lines lines (limit $readme_max): move the depth into a page under docs/"
	fail=1
fi

if [ "$fail" -ne 0 ]; then
	echo "check-tree: FAIL (see above)"
	exit 1
fi
echo "check-tree: ok ($(git ls-files | wc -l) tracked files)"
