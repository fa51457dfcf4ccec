# The README's two commands: `go run ./cmd/intake dev` runs the pipeline,
# `make test` runs every test. Tests start what they need themselves: a
# private Postgres cluster from the server binaries on PATH (or DATABASE_URL)
# and embedded nats-servers.

GO       ?= go
PKGS     ?= ./...
# Where Debian puts the PostgreSQL server binaries when they are not on PATH.
PG_BIN   := $(lastword $(sort $(wildcard /usr/lib/postgresql/*/bin)))
export PATH := $(PATH)$(if $(PG_BIN),:$(PG_BIN),)
# Every go command here builds with grpcnotrace: the OTLP exporter's
# protobuf types link gRPC, whose golang.org/x/net/trace registers debug
# pages that execute html/template at init, and that switches off the
# linker's method dead code elimination (binary +6 MB, ingress RSS up;
# `make deadcode`). gRPC's own build tag leaves x/net/trace out. A plain
# `go run ./cmd/intake dev` works without it, only larger.
export GOFLAGS := $(strip $(GOFLAGS) -tags=grpcnotrace)

.PHONY: all build test vet fmt-check fuzz-short fuzz test-race chaos clean chromium screenshots deadcode image image-bin standin-images compose-smoke

all: build

build: ## build bin/intake
	$(GO) build -trimpath -o bin/intake ./cmd/intake

test: fmt-check vet ## gofmt and vet checks, then every test (the fuzz targets: make fuzz-short)
	$(GO) test -count=1 -timeout 20m $(PKGS)

# The chaos and soak harness (internal/harness/chaos): 10,000 events through separate
# NATS, ingress, processor and Postgres processes under kill -9, restarts and
# concurrent duplicates, on one NATS node, then on a 3-node cluster, then
# with a Postgres failover (primary and synchronous standby), then with the
# business row from a SQL handler in the config. A 1,000-event
# run of each is part of `make test` (internal/harness/chaos TestChaos,
# TestChaosFailover). Extra flags: make chaos CHAOS_FLAGS="--events 50000 --seed 42".
CHAOS_FLAGS ?=
chaos: build ## full chaos runs: single node, a 3-node NATS cluster, a Postgres failover, a SQL handler
	bin/intake bench chaos $(CHAOS_FLAGS)
	bin/intake bench chaos --cluster $(CHAOS_FLAGS)
	bin/intake bench chaos --failover $(CHAOS_FLAGS)
	bin/intake bench chaos --handler sql $(CHAOS_FLAGS)

# The console's browser tests (replayer/console) need a Chromium on PATH and
# skip without one; `make chromium` installs Debian's (as .ci/run does).
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

# The alert rules' tests (internal/harness/checks/observability) run promtool and skip
# without it; `make promtool` installs Debian's prometheus package, which has it.
.PHONY: promtool
promtool:
	@command -v promtool >/dev/null 2>&1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus)

# The tests behind a transaction-mode pooler (TestEveryQueryMode, the pooler checks) start
# Debian's pgbouncer and skip without it; `make pgbouncer` installs it (as .ci/run does).
.PHONY: pgbouncer
pgbouncer:
	@command -v pgbouncer >/dev/null 2>&1 || test -x /usr/sbin/pgbouncer || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends pgbouncer)

# The console's screenshots in docs/console, taken by its browser tests (every
# screenshot(t, ctx, name) call writes docs/console/name.png).
screenshots: chromium
	INTAKE_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run 'TestBrowser' ./replayer/console

# The intake binary keeps the linker's dead code elimination of methods: no
# reachable function looks a method up by a name known only at run time
# (text/template's executor does; docs/console.md). The linker marks such
# functions <ReflectMethod> in its -dumpdep output.
deadcode: ## fail if anything in the intake binary switches method dead code elimination off
	@dir=$$(mktemp -d); log=$$dir/dumpdep; trap 'rm -rf $$dir' EXIT; \
	if ! $(GO) build -ldflags=-dumpdep -o $$dir/intake ./cmd/intake 2>$$log; then grep -v ' -> ' $$log; exit 1; fi; \
	out=$$(grep -o '^[^ ]* <ReflectMethod>' $$log | sort -u); \
	if [ -n "$$out" ]; then echo "method dead code elimination is off in intake; these look methods up by name:"; echo "$$out"; exit 1; fi

test-race: ## every test under the race detector (slower)
	$(GO) test -race -count=1 -timeout 30m $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

FUZZTIME ?= 3s
# Each fuzz target for FUZZTIME, apart from `make test` (.ci/run runs both);
# `make fuzz FUZZTIME=5m` for a long run.
# A failing run prints its output. A new failing input (written under
# testdata/fuzz) fails at once; a run that failed without one (the fuzzing
# engine's worker died or hung) is tried once more.
fuzz-short:
	@set -e; log=$$(mktemp); trap 'rm -f $$log' EXIT; \
	for pkg in $$($(GO) list ./... ); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	    if ! $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg >$$log 2>&1; then \
	      cat $$log; \
	      if [ -n "$$(git status --porcelain -- $$dir/testdata/fuzz/$$f 2>/dev/null)" ]; then exit 1; fi; \
	      echo "fuzz $$pkg $$f: failed without a failing input; once more"; \
	      $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	    fi; \
	  done; \
	done

fuzz:
	$(MAKE) fuzz-short FUZZTIME=$(FUZZTIME)

# The container image (Dockerfile): FROM scratch around a static binary
# built here, so `docker build` pulls nothing. IMAGE_ARCH picks GOARCH.
DOCKER     ?= docker
IMAGE      ?= intake:local
IMAGE_ARCH ?= amd64
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
CA_BUNDLE  ?= /etc/ssl/certs/ca-certificates.crt

image-bin:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath \
	  -ldflags "-s -w -X main.version=$(VERSION)" -o bin/intake-linux-$(IMAGE_ARCH) ./cmd/intake
	@test -r $(CA_BUNDLE) || { echo "no CA bundle at $(CA_BUNDLE) (Debian: apt-get install ca-certificates; or CA_BUNDLE=…)"; exit 1; }
	mkdir -p bin/image && cp $(CA_BUNDLE) bin/image/ca-certificates.crt

# --platform: the image says which architecture its binary is for (without
# it an IMAGE_ARCH=arm64 image built on amd64 would claim amd64).
image: image-bin ## the intake image (every role), tagged $(IMAGE)
	$(DOCKER) build --platform linux/$(IMAGE_ARCH) --build-arg TARGETARCH=$(IMAGE_ARCH) --build-arg VERSION=$(VERSION) \
	  --build-arg REVISION=$(REVISION) --build-arg CREATED=$$(date -u +%Y-%m-%dT%H:%M:%SZ) -t $(IMAGE) .

# Stand-ins for nats:… and postgres:15, built from what this machine has
# (the nats-server module of go.mod, Debian's PostgreSQL server binaries),
# for compose-smoke where no registry is reachable (deploy/images/README.md).
standin-images:
	deploy/images/build.sh

# The compose stack for real: images built here, random secrets, a signed
# webhook through ingress, processed, then everything removed (volumes too).
# Exits 0 with a message when no container engine can be reached.
compose-smoke:
	deploy/compose/smoke.sh

clean:
	rm -rf bin .intake

# The Helm chart and deploy/engines, offline: lint, render, strict decode
# (deploy/validate, its own Go module).
.PHONY: helm-check
helm-check:
	deploy/validate/run
