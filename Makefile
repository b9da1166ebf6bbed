# agentd — developer entry points. `make test` is what CI runs (via .ci/run).
GO      ?= go
PKGS    ?= ./...
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)

.PHONY: run build test bench lint fmt

## run: serve on 127.0.0.1:8080 with the embedded SQLite store in ./agentd-data
run:
	$(GO) run ./cmd/agentd

## build: the agentd binary in bin/
build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/agentd ./cmd/agentd

## test: lint, then every test with the race detector (end-to-end tests build and run the real binary)
test: lint
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## bench: throughput and memory figures (messages appended per second, memory per running chat), warm sandbox exec latency
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./internal/chat/
	$(GO) test -run '^$$' -bench . -benchtime 2s -timeout 30m ./internal/store/...
	$(GO) test -run '^$$' -bench WarmExec -benchtime 1x -timeout 10m ./internal/sandbox/

## lint: formatting and vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

## bench-compare: agentd on Postgres next to pgbench, at C = 1, 8, 32, 128, and memory per waiting chat (cmd/bench-compare/README.md)
.PHONY: bench-compare
bench-compare:
	$(GO) run ./cmd/bench-compare $(BENCH_COMPARE_FLAGS)
