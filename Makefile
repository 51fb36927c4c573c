# runhub — make run starts the hub (embedded journal; ADDR=host:port and
# DATA=dir override the address and the data directory), make test runs
# every test, make help lists the targets.
GO       ?= go
ADDR     ?= 127.0.0.1:8080
DATA     ?= ./data
BIN      := bin/hub
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)

.PHONY: help build run test test-short fault bench lint fuzz loadtest loadtest-centrifugo bench-centrifugo bench-durable test-centrifugo docker compose-up compose-down docs clean

# make help (also plain make) lists the targets and their variables.
help:
	@echo 'runhub make targets:'
	@echo '  make run [ADDR=127.0.0.1:8080] [DATA=./data]  build and start the hub (embedded journal in DATA)'
	@echo '  make build         build bin/hub'
	@echo '  make test          go vet, every test with -race, every fuzzer for 20,000 executions'
	@echo '                     (needs redis-server, redis-cli, chromium, nginx, node, npm: installs'
	@echo '                     them as root with apt-get, else says the command that does)'
	@echo '  make test-short    the tests that need no hub process, without -race'
	@echo '  make fault         the fault suite (needs redis-server; see docs/security.md)'
	@echo '  make bench         the benchmarks'
	@echo '  make lint          go vet, staticcheck, govulncheck'
	@echo '  make fuzz [FUZZTIME=20s]  every fuzz target'
	@echo '  make loadtest [ARGS=…]    the standard load scenario (loadtest/README.md)'
	@echo '  make loadtest-centrifugo  1,000 tabs focusing 200 runs at 50 tokens/s (loadtest/README.md)'
	@echo '  make bench-centrifugo [CENTRIFUGO=path] [ARGS=…]  that workload on Centrifugo, the floor (loadtest/floorhub)'
	@echo '                     and the hub, alternating (-rounds 3 -hub-procs 1,2 -compare-floor): a markdown table'
	@echo '                     with hub/Centrifugo ratios and hub CPU/floor CPU; skipped'
	@echo '                     without a centrifugo binary (go install github.com/centrifugal/centrifugo/v6@v6.9.1)'
	@echo '  make bench-durable CADDY=path [ARGS=…]  Durable Streams: the hub against the Caddy plugin, alternated rounds'
	@echo '  make test-centrifugo [CENTRIFUGO=path]  the loadtest tests against a real Centrifugo (opt-in)'
	@echo '  make docker        the image runhub:dev'
	@echo '  make compose-up [MONITORING=1] / make compose-down  the scaled stack (deploy/compose.yaml)'
	@echo '  make docs          regenerate the tables of docs/configuration.md'
	@echo '  make clean         remove bin/'
	@echo 'The binary: bin/hub help (or bin/hub -h, bin/hub serve -h, …).'

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/hub

run: build
	@echo "runhub: open http://$(ADDR)/ ($(if $(RUNHUB_REDIS_URL),journal on Redis: RUNHUB_REDIS_URL; runs go to hub runner processes,embedded journal in $(DATA)))"
	RUNHUB_ADDR=$(ADDR) RUNHUB_DATA=$(DATA) ./$(BIN) serve

# The whole suite, race detector on, then every fuzz target from its
# committed corpus (testdata/fuzz) for 20,000 executions (by count, not
# time: a time-bounded fuzz run can end in a spurious deadline error).
# Needs on PATH: redis-server and redis-cli (the Redis journal's tests, on
# one server and on a 6-node Redis Cluster), Debian's chromium (the browser
# tests), nginx (deploy/nginx.conf in front of real hubs), node (the
# browser client's unit tests) and npm (the AG-UI packages the AG-UI export
# is tested with). scripts/test-prereqs installs the missing ones as root
# with apt-get, else stops with the command that does (CI takes this path
# too: .ci/run is make test then make fault).
test:
	@GO=$(GO) bash scripts/test-prereqs
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...
	$(MAKE) --no-print-directory fuzz FUZZTIME=20000x

test-short:
	$(GO) test -count=1 -short ./...

# The fault suite (docs/security.md): hub processes under stalled tabs,
# junk frames, socket churn, Redis down at start or killed mid-run, a
# crash between a run's end and the start of the message queued behind it,
# a read-only or full data directory (cmd/hub/fault_*_test.go, build
# tag fault), and durable streams' appends under SIGKILL, a torn log
# tail, repeated recovery and producer retries
# (journal/bolt/fault_streams_test.go). Needs redis-server; root mounts
# small tmpfs data directories
# (otherwise RLIMIT_FSIZE stands in for a full disk and the read-only test
# is skipped). Resident-memory bounds are checked without the race
# detector; FAULTFLAGS=-race runs it with (slower; then only the live heap
# and goroutines are bounded). CI runs it after make test.
# The partition tests (cmd/hub/fault_partition_*_test.go, docs/security.md
# "Partition tests") run Redis (one server and a 3+3 Cluster), hubs,
# runners, tabs and an upstream agent each in a network namespace of its
# own and cut the paths between them: Linux as root with ip (iproute2)
# and iptables-restore (iptables), which scripts/test-prereqs fault installs
# as root with apt like the rest; elsewhere they skip saying why.
FAULTFLAGS ?=
fault:
	@GO=$(GO) bash scripts/test-prereqs fault
	ulimit -n 65536 2>/dev/null || ulimit -n "$$(ulimit -Hn)"; $(GO) test $(FAULTFLAGS) -tags fault -count=1 -timeout 10m -run '^TestFault' -v ./cmd/hub ./journal/bolt ./internal/netfault

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./journal/... ./protocol/... ./session/... ./hub/...

# govulncheck needs https://vuln.go.dev (not reachable from the sandbox).
lint:
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	$(GO) tool govulncheck ./...

# Every fuzz target as package:Func. Each runs for FUZZTIME; a failing input
# lands in the package's testdata/fuzz/<Func>, where plain go test replays it.
FUZZ_TARGETS := \
	./protocol:FuzzDecodeClient ./protocol:FuzzDecodeServer ./protocol:FuzzParseCursor \
	./protocol:FuzzParseLastEventID ./protocol:FuzzSplitBatch ./session:FuzzApplyValidEvent \
	./journal/bolt:FuzzRow ./journal/bolt:FuzzHead \
	./internal/lineread:FuzzReadLine ./internal/lineread:FuzzReaderLines ./adapter/hermes:FuzzReadSSE ./adapter/openai:FuzzReadSSE \
	./hub/agui:FuzzMapper ./hub/agui:FuzzTurns ./hub/aisdk:FuzzMapper ./protocol:FuzzCompact \
	./protocol:FuzzValidDelta ./protocol:FuzzAppendEventFrame ./protocol:FuzzNewEventDelta \
	./adapter/agui:FuzzReadFrames ./adapter/agui:FuzzApply \
	./hub/durable/subscription:FuzzRegistration ./hub/durable/subscription:FuzzRoute \
	./hub/tabsock:FuzzDifferential ./hub/tabsock:FuzzBounds
FUZZTIME ?= 20s
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t##*:} ($${t%%:*}, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$${t##*:}\$$" -fuzztime $(FUZZTIME) $${t%%:*}; \
	done

# The standard scenario (loadtest/README.md): a spawned embedded hub, 1,000
# tabs each watching 10 of 200 sessions, 200 concurrent runs at 50 tokens/s.
# ARGS replaces it. Thousands of sockets need open files: the limit is raised
# for the generator and the hubs it spawns.
LOADTEST_ARGS ?= -spawn -tabs 1000 -watch 10 -sessions 200 -runs 200 -tokens 500 -token-ms 20 -focus-every 10s -warmup 5s -duration 30s
loadtest:
	ulimit -n 65536 2>/dev/null || ulimit -n "$$(ulimit -Hn)"; $(GO) run ./loadtest $(or $(ARGS),$(LOADTEST_ARGS))

# Centrifugo's workload (loadtest/README.md): a spawned embedded hub with its
# journal on disk, 1,000 tabs each watching and focusing one of 200 sessions
# (5 per run), 200 runs at 50 tokens/s, no focus switching. ARGS adds flags.
loadtest-centrifugo:
	ulimit -n 65536 2>/dev/null || ulimit -n "$$(ulimit -Hn)"; $(GO) run ./loadtest -scenario centrifugo $(ARGS)

# The hub against Centrifugo (loadtest/README.md): Centrifugo's workload on
# a Centrifugo binary (CENTRIFUGO=path, else centrifugo on PATH or in
# ~/go/bin; skipped with a message when there is none), on the floor
# (loadtest/floorhub, one write per delivery) and on the spawned hub,
# alternating for 3 rounds, the hub at GOMAXPROCS 1 and 2; the markdown
# table (with hub/Centrifugo ratios and hub CPU ÷ the floor's) goes to
# stdout. ARGS adds flags.
BENCH_CENTRIFUGO_ARGS ?= -rounds 3 -hub-procs 1,2 -compare-floor
bench-centrifugo:
	ulimit -n 65536 2>/dev/null || ulimit -n "$$(ulimit -Hn)"; $(GO) run ./loadtest -compare centrifugo $(if $(CENTRIFUGO),-centrifugo $(CENTRIFUGO)) $(BENCH_CENTRIFUGO_ARGS) $(ARGS)

# The Durable Streams benchmark (loadtest/dsbench): runhub's /v1/stream/*
# and the durable-streams project's Caddy plugin, alternated round by round,
# one client. CADDY=path to its server binary (built from its
# packages/caddy-plugin: go build ./cmd/caddy).
bench-durable: build
	$(GO) run ./loadtest/dsbench -hub-bin ./$(BIN) -caddy-bin $(CADDY) $(ARGS)

# The loadtest tests that start a real Centrifugo (build tag centrifugo);
# opt-in, and they fail without the binary.
test-centrifugo:
	ulimit -n 65536 2>/dev/null || ulimit -n "$$(ulimit -Hn)"; CENTRIFUGO=$(CENTRIFUGO) $(GO) test -tags centrifugo -count=1 -timeout 20m -run '^TestCentrifugo' -v ./loadtest

# One image for hub serve and hub runner (Dockerfile); needs a Docker engine.
docker:
	docker build --build-arg VERSION=$(VERSION) -t runhub:$(VERSION) -t runhub:dev .

# The scaled stack of deploy/compose.yaml: Redis, two hubs, two runners and
# nginx on http://127.0.0.1:8080/ (MONITORING=1 adds Prometheus and Grafana).
COMPOSE := docker compose -f deploy/compose.yaml $(if $(MONITORING),--profile monitoring)
compose-up:
	RUNHUB_VERSION=$(VERSION) $(COMPOSE) up --build -d
compose-down:
	$(COMPOSE) down

# Regenerate the tables of docs/configuration.md from the flag sets.
docs:
	$(GO) test ./cmd/hub -run TestConfigurationReference -count=1 -update

clean:
	rm -rf bin
