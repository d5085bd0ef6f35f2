# foldstream — see README.md.
GO ?= go

.PHONY: all build test test-python test-ts vet lint fmt-check generate run demo bench eval fuzz clean

all: build

build:
	$(GO) build -o bin/processor ./cmd/processor

# The whole suite: real in-process nats-servers, the real go-openai client
# against an in-process chat-completions server, the race detector.
test: fmt-check vet
	$(GO) test -race -count=1 -timeout 12m ./...
	$(MAKE) test-python
	$(MAKE) test-ts

# The Python client (clients/python): its tests against the processor
# binary on its embedded nats-server and against a nats-server built from
# go.mod (auth configs of nats/), with Debian's python3, pytest and mypy
# (.ci/run installs them). Under CI=1 missing prerequisites fail the suite.
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
test-python: build
	$(GO) build -o bin/nats-server github.com/nats-io/nats-server/v2
	cd clients/python && $(PYTHON) -m mypy --strict foldstream
	cd clients/python && FOLDSTREAM_PROCESSOR=$(CURDIR)/bin/processor FOLDSTREAM_NATS_SERVER=$(CURDIR)/bin/nats-server \
		$(PYTHON) -m pytest -q -p no:cacheprovider

# The TypeScript client (clients/typescript): npm ci from its lock file,
# src/wire.ts checked against schema/v1, tsc --strict, then node's test
# runner on the compiled tests against bin/processor on its embedded
# nats-server. Under CI=1 a missing prerequisite fails the suite.
test-ts: build
	cd clients/typescript && npm ci --no-audit --no-fund && npm test

vet:
	$(GO) vet ./...

# Writes what is derived from the settings' declarations and the modes'
# files: the schemas' mode and setting properties, the tables of
# docs/modes.md, and the TypeScript client's wire types
# (clients/typescript/src/wire.ts, from schema/v1). internal/events' tests
# and the TypeScript suite fail while the committed files differ.
generate:
	$(GO) generate ./internal/events
	node clients/typescript/scripts/gen-wire.mjs

# staticcheck, pinned; the two deliberate exceptions carry //lint:ignore
# with their reason. CI runs it after the tests.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	$(GO) run $(STATICCHECK) ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# Processor on the embedded default (nats-server in-process, offline summarizer).
# make run ARGS='--mode tokens' passes flags.
run:
	@echo "make run: compiling ./cmd/processor (the first build takes about a minute), then starting it"
	$(GO) run ./cmd/processor $(ARGS)

# Processor plus a demo bot: shows summaries being folded, a new session each
# run. make demo ARGS='--turns 200' passes flags (go run ./cmd/processor demo -h).
demo:
	@echo "make demo: compiling ./cmd/processor (the first build takes about a minute), then starting the demo"
	$(GO) run ./cmd/processor demo $(ARGS)

# Ratios measured in one run on one server; see docs/benchmarks.md.
bench:
	$(GO) run ./cmd/bench

# Continuity on the development meetings (../shared/data/qmsum/val, or
# EVAL_ARGS="-data DIR"): answer-word recall of each context a builder can
# get, beside plain truncation; see docs/continuity.md. Seconds on 2 cores.
eval:
	$(GO) run ./cmd/eval $(EVAL_ARGS)

# Short fuzzing of every fuzz target, one at a time (go test fuzzes one
# target per run), FUZZTIME each; the seed corpora run in `make test`.
# The targets are found, not listed here, so a new one is fuzzed too.
FUZZTIME ?= 30s
fuzz:
	@set -e; n=0; \
	for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for target in $$($(GO) test -list '^Fuzz' $$dir | grep '^Fuzz'); do \
	    echo "fuzz $$dir $$target ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$dir; \
	    n=$$((n+1)); \
	  done; \
	done; \
	echo "$$n fuzz targets fuzzed"

clean:
	rm -rf bin data

# Soak (not in CI): the processor binary for SOAK_DURATION against a 3-node
# cluster while a bot publishes to SOAK_SESSIONS sessions, with model 5xx
# and hangs, a SIGKILL every few minutes and the inbound stream's leader
# node shut down; RSS and goroutines every minute, the exactly-once check
# at the end (docs/reliability.md). make soak SOAK_DURATION=5m for a short one.
SOAK_DURATION ?= 1h
SOAK_SESSIONS ?= 1000
.PHONY: soak soak-kills
soak:
	$(GO) test -count=1 -timeout 0 -run '^TestSoak$$' -v ./internal/crashtest/ -args -soak-duration $(SOAK_DURATION) -soak-sessions $(SOAK_SESSIONS)

# Long crash-safety run: the processor binary SIGKILLed 200 times while a
# bot publishes (docs/reliability.md). FOLDSTREAM_SOAK_KILLS=500 for more,
# FOLDSTREAM_CRASH_SEED=<seed printed by a run> to replay one.
soak-kills:
	FOLDSTREAM_SOAK=1 $(GO) test -count=1 -timeout 60m -run TestCrashSafety -v ./internal/crashtest/
