# Every target starts the Redis nodes it needs; redis-server is installed
# from Debian's packages when missing (scripts/ensure-redis.sh).
GO ?= go
RACE ?= -race
# INVARIANT_AVOID=pattern,... leaves parts out of the randomized invariant
# test's workload (see integration/invariant); empty: all of it.
INVARIANT_AVOID ?=

.PHONY: demo test check unit oldest-go integration integration-ci invariant-long cli examples chaos chaos-full durable bench bench-go bench-quick compose-check matrix matrix-ci ci transports

## demo: the main job: workers contending for one lock across embedded nodes, through a node fault
demo:
	cd cmd/redlock && $(GO) run . demo

## test: the full test suite: gofmt, vet, unit, integration (core, metrics, harness, topology, handoff, invariant), CLI, the fencing example (PostgreSQL), chaos short mode (processes and containers), durable votes (Valkey 8.0)
test: check unit integration cli examples chaos durable
	@echo "make test: all passed"

## check: no replace in a go.mod, no binary or file over 1 MB tracked, no module but the root importing internal/, the root package within its budget of exported symbols, every relative link of README.md, SAFETY.md and docs/*.md resolves, README.md at most 300 lines (scripts/check-tree.sh, scripts/docstats.sh); gofmt; vet of every module
# The library is vetted twice: in the workspace (go.work), whose dependency
# versions are the highest any module needs, and alone (GOWORK=off), on the
# versions its own go.mod names, which are what its users get.
check:
	@scripts/check-tree.sh
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(RACE) ./...
	GOWORK=off $(GO) vet ./...
	cd integration && $(GO) vet $(RACE) ./...
	cd cmd/redlock && $(GO) vet $(RACE) ./...
	cd cmd/redlock-bench && $(GO) vet $(RACE) ./...
	cd cmd/internal/localredis && $(GO) vet $(RACE) ./...
	cd redlockotel && $(GO) vet $(RACE) ./...
	cd examples/stock && $(GO) vet $(RACE) ./...
	cd redlocktest && $(GO) vet $(RACE) ./...
	cd rueidisconn && $(GO) vet $(RACE) ./...
	cd valkeyconn && $(GO) vet $(RACE) ./...

# The library's unit tests run twice: in the workspace (the newest go-redis
# any module asks for) and alone (the go-redis its go.mod names: what its
# users get at least), the second time without -race: the first has it.
# (vet in check builds with $(RACE) too, so the tests reuse its builds.)
unit:
	$(GO) test $(RACE) -count=1 ./...
	GOWORK=off $(GO) test -count=1 ./...
	cd redlockotel && $(GO) test $(RACE) -count=1 ./...
	cd redlocktest && $(GO) test $(RACE) -count=1 ./...

## oldest-go: the library, redlocktest and redlockotel built, vetted and tested (no -race) with the oldest Go each go.mod declares (the toolchain from the module proxy), and a user module at that go line keeps it after go mod tidy
oldest-go:
	scripts/oldest-go.sh

integration:
	@scripts/ensure-redis.sh
	cd integration && INVARIANT_AVOID=$(INVARIANT_AVOID) $(GO) test $(RACE) -count=1 $(INTEGRATION_SKIP) ./core/ ./metrics/ ./harness/ ./topology/ ./handoff/ ./invariant/ ./conformance/ ./transports/ ./docs/

# integration-ci: make integration without the 20 s TestInvariant, which
# invariant-long runs for 3 minutes in the same CI run.
integration-ci: INTEGRATION_SKIP = -skip '^TestInvariant$$'
integration-ci: integration

cli:
	@scripts/ensure-redis.sh
	cd cmd/redlock && $(GO) test $(RACE) -count=1 ./...
	cd cmd/redlock-bench && $(GO) test $(RACE) -count=1 ./...
	cd cmd/internal/localredis && $(GO) test $(RACE) -count=1 ./...

## examples: the fencing example against its own PostgreSQL and redis-server (installs postgresql if missing)
examples:
	@scripts/ensure-redis.sh
	@scripts/ensure-postgres.sh
	cd examples/stock && $(GO) test $(RACE) -count=1 ./...

## chaos: short chaos suite (< 2 min); chaos-full: every scenario (< 10 min)
chaos:
	@scripts/ensure-redis.sh
	cd integration && $(GO) test $(RACE) -count=1 -timeout 10m ./chaos/

## durable: durable votes against Valkey 8.0 (installed from bookworm-backports when missing: scripts/servers.sh): the core tests, majority restarts with the AOF kept and lost, the sanity twin, availability under majority restarts (15 s runs)
durable:
	@scripts/ensure-redis.sh
	cd integration && export DURABLE_SERVER=$$(../scripts/servers.sh path valkey-8.0) DURABLE_REQUIRE=1 && \
		$(GO) test $(RACE) -count=1 -timeout 10m -run 'Durable' -skip 'TestDurableAvailability' ./core/ ./chaos/ && \
		RESTART_AVAIL_DURATION=15s $(GO) test -count=1 -timeout 10m -run 'TestDurableAvailability' -v ./chaos/

chaos-full:
	@scripts/ensure-redis.sh
	cd integration && CHAOS_FULL=1 $(GO) test -count=1 -timeout 11m ./chaos/

## transports: the transport seam's conformance test (go-redis, rueidis, valkey-go against redis-server), then the core, hand-off and invariant suites once per transport (REDLOCK_TRANSPORT=goredis|rueidis|valkey); every transport runs even if one fails
TRANSPORTS ?= goredis rueidis valkey
transports:
	cd integration && $(GO) test $(RACE) -count=1 ./transports/
	@cd integration && failed=; for tr in $(TRANSPORTS); do \
		echo "== core suite via $$tr"; \
		REDLOCK_TRANSPORT=$$tr $(GO) test -count=1 -timeout 30m ./core/ ./handoff/ ./invariant/ || failed="$$failed $$tr"; \
	done; \
	if [ -n "$$failed" ]; then echo "make transports: core suite failed via:$$failed"; exit 1; fi; \
	echo "make transports: all passed"

## bench: this library vs go-redsync and others, side by side (cmd/redlock-bench, a module of its own); writes docs/bench/
bench:
	@scripts/ensure-redis.sh
	cd cmd/redlock-bench && $(GO) run . --out ../../docs/bench

bench-quick:
	@scripts/ensure-redis.sh
	cd cmd/redlock-bench && $(GO) run . --quick --out $${TMPDIR:-/tmp}/redlock-bench-quick

## bench-go: go test -bench of acquire+release on 5 nodes, healthy and one frozen
bench-go:
	@scripts/ensure-redis.sh
	cd integration && $(GO) test -run '^$$' -bench AcquireRelease -benchtime 2000x -count 5 ./core/

compose-check:
	scripts/compose-check.sh

## invariant-long: the randomized invariant test for about 3 minutes
invariant-long:
	@scripts/ensure-redis.sh
	cd integration && INVARIANT_LONG=1 INVARIANT_AVOID=$(INVARIANT_AVOID) $(GO) test $(RACE) -count=1 -timeout 10m -run '^TestInvariant$$' -v ./invariant/

## matrix: Redis 7.0 and 8.0, Valkey 8.0 and 8.1 from Debian's packages (scripts/servers.sh): the core suite (no -race) and redlock doctor on each, the chaos short suite on one (rotating by day), and the core suite through rueidis and valkey-go on Redis 7.0 and Valkey 8.0; writes docs/servers.md
matrix:
	scripts/matrix.sh

# In ci, redis-7.0's core suite already ran (with -race) in make
# integration; of Redis 8.0 and Valkey 8.1 one runs a day, and two of the
# four transport pairs, crossed on alternate days (scripts/matrix.sh).
matrix-ci:
	MATRIX_NO_CORE=redis-7.0 MATRIX_ROTATE=1 scripts/matrix.sh

## ci: what .ci/run runs: make test's suites (but chaos short and the short TestInvariant, which chaos-full and invariant-long cover) and oldest-go, chaos-full, invariant-long, compose-check, bench-quick, matrix-ci, in three lanes side by side (scripts/ci.sh)
ci:
	scripts/ci.sh
