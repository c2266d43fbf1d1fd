#!/usr/bin/env bash
# Builds, vets and tests the modules that users import (the library,
# redlocktest, redlockotel) with the oldest Go each one's go.mod declares:
# "go 1.22" is checked with go1.22.0. A go line raised by a newer language
# feature, standard-library call or dependency fails here instead of on a
# user's machine. The toolchain comes from the module proxy
# (GOTOOLCHAIN=goX.Y.Z); no -race, no integration tests.
#
# The modules other than the root require the library at its release
# version, which may not be published yet: each is built in a workspace of
# its own (the root and that module, the go line its go.mod names) in a
# temporary directory, so the repository's go.work (Go 1.26) is not used.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# goline prints the go line of module directory $1 (1.22 or 1.22.3).
goline() { sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' "$1/go.mod"; }

# toolchain maps a go line to the oldest release it allows.
toolchain() {
  case $1 in
    *.*.*) echo "go$1" ;;
    *) echo "go$1.0" ;;
  esac
}

for mod in . redlocktest redlockotel; do
  line=$(goline "$mod")
  tc=$(toolchain "$line")
  echo "oldest-go: $mod (go $line) with $tc"
  ws="$tmp/$(basename "$(cd "$mod" && pwd)").work"
  {
    echo "go $line"
    echo "use $root"
    [ "$mod" = . ] || echo "use $root/$mod"
    echo "replace github.com/redlock-go/redlock v0.1.0 => $root"
  } >"$ws"
  (cd "$mod" && GOWORK="$ws" GOTOOLCHAIN="$tc" GOFLAGS= go vet ./... &&
    GOWORK="$ws" GOTOOLCHAIN="$tc" GOFLAGS= go test -count=1 ./...)
done
# A user's module at the oldest go line, importing redlocktest in a test
# and redlockotel: go mod tidy must leave its go line alone (a dependency
# whose go line is higher raises the user's).
user="$tmp/user"
mkdir -p "$user"
want=$(goline .)
cat >"$user/go.mod" <<MOD
module example.com/user

go $want

require (
	github.com/redlock-go/redlock v0.1.0
	github.com/redlock-go/redlock/redlockotel v0.1.0
	github.com/redlock-go/redlock/redlocktest v0.1.0
)

replace github.com/redlock-go/redlock v0.1.0 => $root

replace github.com/redlock-go/redlock/redlockotel v0.1.0 => $root/redlockotel

replace github.com/redlock-go/redlock/redlocktest v0.1.0 => $root/redlocktest
MOD
cat >"$user/user.go" <<'SRC'
package user

import (
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlockotel"
)

func Options(m *redlockotel.Metrics) []redlock.Option { return m.Options() }
SRC
cat >"$user/user_test.go" <<'SRC'
package user

import (
	"testing"

	"github.com/redlock-go/redlock/redlocktest"
)

func TestNodes(t *testing.T) { _ = redlocktest.New(t).Client() }
SRC
(cd "$user" && GOWORK=off GOFLAGS=-mod=mod go mod tidy)
got=$(goline "$user")
if [ "$got" != "$want" ] || grep -q '^toolchain' "$user/go.mod"; then
  echo "oldest-go: a user module at go $want has go $got after go mod tidy:" >&2
  cat "$user/go.mod" >&2
  exit 1
fi
(cd "$user" && GOWORK=off GOTOOLCHAIN="$(toolchain "$want")" GOFLAGS= go vet ./...)
echo "oldest-go: a user module at go $want keeps its go line after go mod tidy and vets clean with $(toolchain "$want")"
echo "oldest-go: all passed"
