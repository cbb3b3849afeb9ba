# Paddock build and test entry points. `make test` is what CI runs.
GO      ?= go
BIN     ?= bin
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build deps test unit integration crun-test lint cross bench up clean

all: build

## build: the daemon, the CLI, the static guest agent and the pinned runc
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/paddockd ./cmd/paddockd
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/paddock ./cmd/paddock
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/paddock-agent ./cmd/paddock-agent
	$(GO) build -tags seccomp -o $(BIN)/runc github.com/opencontainers/runc

## deps: install the system packages the build and the tests need (Debian/Ubuntu, as root)
deps:
	scripts/deps.sh

## test: everything CI runs (as root): lint, unit tests, integration tests against runc and crun
test: deps build lint cross unit integration

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1)
	$(GO) vet ./...

cross:
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./cmd/paddock
	GOOS=windows GOARCH=amd64 $(GO) build -o /dev/null ./cmd/paddock

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /integration)

integration:
	scripts/cgroup-setup.sh
	$(GO) test -count=1 -timeout 20m ./integration/ -args -paddock.bin=$(CURDIR)/$(BIN)
	PADDOCK_TEST_RUNTIME=crun $(GO) test -count=1 -timeout 10m -run 'TestConformance' ./integration/ -args -paddock.bin=$(CURDIR)/$(BIN)

## bench: the create/exec/bare benchmark of docs/benchmarks.md
bench: build
	scripts/cgroup-setup.sh
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 200x ./integration/ -args -paddock.bin=$(CURDIR)/$(BIN)

## up: install what is needed, build, and start paddockd (prints the URL and an API key)
up:
	scripts/up.sh

clean:
	rm -rf $(BIN)
