# agentd — developer entry points. `make test` is what CI runs (via .ci/run).
GO      ?= go
PKGS    ?= ./...
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# staticcheck, pinned; `go run pkg@version` fetches it from the module proxy once.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Debian's interpreter, which has the python3-* packages the Python client needs.
PYTHON  ?= /usr/bin/python3

.PHONY: run build test test-go bench fuzz lint fmt clients golden golden-swarm test-python lint-python test-autogen-client

## run: serve on 127.0.0.1:8080 with the embedded SQLite store in ./agentd-data
run:
	$(GO) run ./cmd/agentd

## build: the agentd binary in bin/
build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/agentd ./cmd/agentd

## test: lint, then test-go
test: lint test-go

## test-go: every test with the race detector (end-to-end tests build and run the real binary;
## e2e's TestPythonClient runs the Python client's pytest suite against it, alongside the Go tests);
## ends with the list of skipped tests and why (internal/testsummary reads go test -json); with CI=true
## a skipped test fails the run unless internal/testsummary/allowed-skips.txt allows it.
## Then the tests of a waiting chat's stack size, without the race detector, which makes every frame larger
## (internal/runtime/stack_test.go); the run fails unless both passed (a -run that matches nothing passes).
## .ci/run runs lint and test-go apart, to lint while the sandbox image is being built
STACK_TESTS = TestAWaitingChatsStackIsHalved|TestAChatWaitingInAStreamedReplyKeepsAnEightKBStack
test-go:
	bash -o pipefail -c '$(GO) test -race -count=1 -timeout 20m -json $(PKGS) | $(GO) run ./internal/testsummary'
	bash -o pipefail -c '$(GO) test -count=1 -timeout 5m -run "^($(STACK_TESTS))$$" -v ./internal/runtime/ | tee /dev/stderr | grep -c "^--- PASS" | grep -qx 2'

## bench: throughput and memory figures (messages appended per second, memory per running chat, SSE fan-out to 1,000 streams of one chat: delivery p50/p99 next to a bare SSE server, and store reads per append), warm sandbox exec latency, worst-case text_match cost per message, CPU of one streamed model reply
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./internal/runtime/ ./internal/server/ ./internal/chat/engine/ ./internal/spec/
	$(GO) test -run '^$$' -bench . -benchtime 2s -timeout 30m ./internal/store/...
	$(GO) test -run '^$$' -bench WarmExec -benchtime 1x -timeout 10m ./internal/sandbox/
	$(GO) test -run '^$$' -bench OpenAIStreamedReply -benchtime 20000x -timeout 10m ./internal/llm/

## fuzz: every fuzz target for FUZZTIME each (seed corpora in testdata/fuzz; what they find is kept there as a regression test).
## A count of executions rather than a duration: a duration that ends while a worker is busy makes go test fail with
## "context deadline exceeded", although nothing was found.
FUZZTIME ?= 5000x
FUZZ_TARGETS = \
	./internal/spec:FuzzDecodeSpec \
	./internal/spec:FuzzDecodeFast \
	./internal/chat/engine:FuzzTermination \
	./internal/chat/engine:FuzzTextMatchPattern \
	./internal/chat/engine:FuzzExtractCodeBlocks \
	./internal/tool:FuzzArguments \
	./internal/pyfunc:FuzzParse \
	./internal/store/internal/param:FuzzDecodeCursor \
	./internal/server:FuzzResumePoint \
	./internal/server:FuzzWriteSSE \
	./internal/server:FuzzDeltaEvent \
	./internal/llm:FuzzStreamChunk \
	./internal/llm:FuzzEncodeMessage \
	./internal/jsonstr:FuzzAppend
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; echo "fuzz $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

## clients: generate the TypeScript and Go clients from api/openapi.yaml with default flags, compile them and run them against agentd (needs npm)
clients: build
	api/clients/check.sh bin/agentd

## lint: formatting, vet and staticcheck; the Python client's flake8 and mypy --strict
lint: lint-python
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)

## lint-python: the Python client (clients/python) linted with flake8 and type-checked with mypy --strict (Debian's packages)
lint-python:
	cd clients/python && $(PYTHON) -m flake8 agentd tests autogen_check && $(PYTHON) -m mypy --strict agentd tests autogen_check

## test-python: the Python client's lint and tests against bin/agentd (what TestPythonClient runs in make test)
test-python: build lint-python
	cd clients/python && AGENTD_BIN=$(CURDIR)/bin/agentd $(PYTHON) -m pytest -q

## test-autogen-client: RemoteTeam under AutoGen AgentChat 0.7.5 (Console's text, run_stream's items, run()'s
## TaskResult, cancellation) against the same teams run in-process, recorded in clients/python/tests/testdata/agentchat.
## Needs the environment of e2e/autogen/README.md, so CI cannot run it; RECORD=1 records the teams again first.
test-autogen-client: build
	clients/python/autogen_check/run.sh $(CURDIR)/bin/agentd

fmt:
	gofmt -w $$(git ls-files '*.go')

## golden: re-record e2e/autogen/testdata by running AutoGen AgentChat 0.7.5 (needs the environment of e2e/autogen/README.md)
golden:
	e2e/autogen/record.sh

## golden-swarm: re-record e2e/swarm/testdata by running OpenAI Swarm's core.py (needs the environment of e2e/swarm/README.md)
golden-swarm:
	e2e/swarm/record.sh

## bench-compare: agentd on Postgres next to pgbench and agentd on SQLite, at C = 1, 8, 32, 128, and memory per waiting chat (cmd/bench-compare/README.md)
.PHONY: bench-compare
bench-compare:
	$(GO) run ./cmd/bench-compare $(BENCH_COMPARE_FLAGS)
