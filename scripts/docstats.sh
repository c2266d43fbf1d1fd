#!/usr/bin/env bash
# Prints, for the root package and packages observe, admin and fence: the
# number of exported symbols (types, funcs, methods, consts and vars, each
# name counted once, as go/doc sees them) and the words of `go doc -all`.
#   scripts/docstats.sh            a table
#   scripts/docstats.sh -count DIR only DIR's symbol count (check-tree.sh)
# The counter is a stdlib-only Go program run from a temporary module, so
# the library carries no main package for it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
GO=${GO:-go}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/go.mod" <<'MOD'
module docstats

go 1.22
MOD
cat >"$tmp/main.go" <<'SRC'
// Command docstats prints the number of exported symbols of the package in
// the directory it is given.
package main

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
)

func main() {
	dir := os.Args[1]
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docstats:", err)
		os.Exit(1)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			fmt.Fprintln(os.Stderr, "docstats:", err)
			os.Exit(1)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, bp.ImportPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docstats:", err)
		os.Exit(1)
	}
	values := func(vs []*doc.Value) (n int) {
		for _, v := range vs {
			n += len(v.Names)
		}
		return n
	}
	types, funcs, methods := len(p.Types), len(p.Funcs), 0
	consts, vars := values(p.Consts), values(p.Vars)
	for _, t := range p.Types {
		funcs += len(t.Funcs)
		methods += len(t.Methods)
		consts += values(t.Consts)
		vars += values(t.Vars)
	}
	fmt.Println(types+funcs+methods+consts+vars, types, funcs, methods, consts, vars)
}
SRC

# count DIR prints "total types funcs methods consts vars" for DIR.
count() { (cd "$tmp" && GOWORK=off GOFLAGS=-mod=mod "$GO" run . "$root/$1"); }

if [ "${1:-}" = "-count" ]; then
	count "$2" | cut -d' ' -f1
	exit 0
fi

printf '%-10s %7s %5s %5s %7s %6s %4s %9s\n' package symbols types funcs methods consts vars doc-words
for dir in . observe admin fence; do
	if [ ! -d "$dir" ]; then
		continue
	fi
	read -r total types funcs methods consts vars < <(count "$dir")
	words=$("$GO" doc -all "./$dir" | wc -w)
	name=$([ "$dir" = . ] && echo redlock || echo "$dir")
	printf '%-10s %7s %5s %5s %7s %6s %4s %9s\n' "$name" "$total" "$types" "$funcs" "$methods" "$consts" "$vars" "$words"
done
