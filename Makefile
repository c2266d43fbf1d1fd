# Every target starts the Redis nodes it needs; redis-server is installed
# from Debian's packages when missing (scripts/ensure-redis.sh).
GO ?= go
RACE ?= -race

.PHONY: demo test check unit integration chaos chaos-full bench bench-quick compose-check ci

## demo: the main job: workers contending for one lock across embedded nodes, through a node fault
demo:
	cd cmd/redlock && $(GO) run . demo

## test: the full test suite (format, vet, unit, integration, CLI, metrics, chaos short mode)
test: check unit integration
	@echo "make test: all passed"

check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd integration && $(GO) vet ./...

unit:
	$(GO) test $(RACE) -count=1 ./...

integration:
	@scripts/ensure-redis.sh
	cd integration && $(GO) test $(RACE) -count=1 ./core/

## bench: acquire+release on 5 local nodes, healthy and one frozen (go test -bench)
bench:
	@scripts/ensure-redis.sh
	cd integration && $(GO) test -run '^$$' -bench AcquireRelease -benchtime 2000x -count 5 ./core/
