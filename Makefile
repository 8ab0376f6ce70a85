# counterd — see README.md. `make help` lists the targets.
SHELL := bash
GO    ?= go
BIN   := bin

.DEFAULT_GOAL := help
.PHONY: help build release image run test cross bench gobench fuzz pg-start pg-stop pg-destroy clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-11s %s\n", $$1, $$2}'

# What --version prints: git describe of the checkout (a tag, or the
# commit, with -dirty for uncommitted changes); without git, Go's own record.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null)
LDFLAGS := $(if $(VERSION),-X github.com/counterd/counterd/internal/version.version=$(VERSION))

build: ## build bin/counterd and bin/rollup (--version: git describe --always --dirty)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/counterd ./cmd/rollup

# Release archives and packages (scripts/release.sh; deploy/systemd/README.md).
release: ## build dist/: tar.gz of counterd and rollup for linux, darwin × amd64, arm64, .deb packages, SHA256SUMS
	@GO='$(GO)' VERSION='$(or $(VERSION),$(error make release: no VERSION (git describe found nothing); set VERSION=...))' scripts/release.sh

# The image (deploy/image/README.md): static binaries (no libc in the image),
# without DWARF and symbol tables (-s -w: 30% smaller, 45% compressed), written by
# deploy/cmd/counterd-image with go-containerregistry, no daemon.
# Its labels need a version: without git, set VERSION. IMAGE_LICENSES is
# the SPDX expression for org.opencontainers.image.licenses (none: no LICENSE).
IMAGE_LICENSES ?=
IMAGE_CA := $(wildcard /etc/ssl/certs/ca-certificates.crt)
image: ## build the OCI image (counterd, rollup; no shell; user 65532) into bin/image/ and bin/image.tar
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(BIN)/static/ ./cmd/counterd ./cmd/rollup
	cd deploy && $(GO) run ./cmd/counterd-image -counterd $(abspath $(BIN))/static/counterd -rollup $(abspath $(BIN))/static/rollup \
		-version '$(or $(VERSION),$(error make image: no VERSION (git describe found nothing); set VERSION=...))' \
		-revision '$(shell git rev-parse HEAD 2>/dev/null)' -created '$(shell git log -1 --format=%ct 2>/dev/null)' \
		-licenses '$(IMAGE_LICENSES)' $(if $(IMAGE_CA),-ca-certificates $(IMAGE_CA)) \
		-layout $(abspath $(BIN))/image -archive $(abspath $(BIN))/image.tar

run: build ## start a throwaway PostgreSQL (unless DATABASE_URL is set), counterd and the rollup scheduler
	@BIN=$(BIN) scripts/run.sh

test: ## go test -race ./... (and each internal benchmark once) against a throwaway PostgreSQL (or TEST_DATABASE_URL)
	@scripts/test.sh

cross: ## compile and vet for macOS and FreeBSD (make test does too; Linux-only code lives in _linux.go files)
	@scripts/cross.sh

bench: ## compare counting patterns, counterd and Redis into results/ (COUNTERBENCH_* settings: bin/counterbench -h)
	@scripts/bench.sh

BENCH ?= .
COUNT ?= 1
gobench: ## Go benchmarks (BENCH=regexp, COUNT=n)
	@scripts/test.sh -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT)

fuzz: ## fuzz the protocol reader for 30s
	$(GO) test -run '^$$' -fuzz FuzzReader -fuzztime 30s ./internal/resp

pg-start: ## start the throwaway PostgreSQL and print its URL
	@scripts/pg.sh start

pg-stop: ## stop the throwaway PostgreSQL
	@scripts/pg.sh stop

pg-destroy: ## stop the throwaway PostgreSQL and delete its data
	@scripts/pg.sh destroy

clean: ## remove build outputs
	rm -rf $(BIN)
