# Paddock build and test entry points. `make test` is what CI runs.
GO      ?= go
BIN     ?= bin
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build deps test unit integration crun-test lint generate check-generated cross bench soak up clean sdk-python sdk-typescript

all: build

## build: the daemon, the CLI, the static guest agent and the pinned runc,
## and paddock-fakemodel, the fake model API the SDK tests use (a test tool, not shipped)
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/paddockd ./cmd/paddockd
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/paddock ./cmd/paddock
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/paddock-agent ./cmd/paddock-agent
	$(GO) build -tags seccomp -o $(BIN)/runc github.com/opencontainers/runc
	$(GO) build -o $(BIN)/paddock-fakemodel ./internal/fakemodel/cmd/paddock-fakemodel

## deps: install the system packages the build and the tests need (Debian/Ubuntu, as root)
deps:
	scripts/deps.sh

## test: everything CI runs (as root): lint, unit tests, integration tests against runc and crun
test: deps build lint check-generated cross unit integration sdk-python sdk-typescript

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1)
	$(GO) vet ./...

## generate: write what derives from api/openapi.yaml, the one source of the API contract: the Go wire types and error table (api/*.gen.go) and the SDK types and error classes
GENERATED := 'api/*.gen.go' \
	sdk/typescript/src/types.gen.ts sdk/typescript/src/errors.gen.ts \
	sdk/python/src/paddock/_types_gen.py sdk/python/src/paddock/_errors_gen.py sdk/python/src/paddock/_models_gen.py
generate:
	$(GO) run ./internal/apigen -spec api/openapi.yaml

## check-generated: fail when a generated file differs from what `make generate` writes (a spec changed without regenerating, or a generated file edited by hand)
check-generated: generate
	@git diff --exit-code -- $(GENERATED) || (echo 'generated files are out of date: run make generate and commit'; exit 1)
	@test -z "$$(git status --porcelain -- $(GENERATED))" || (git status --porcelain -- $(GENERATED); echo 'generated files are not committed'; exit 1)

cross:
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./cmd/paddock
	GOOS=windows GOARCH=amd64 $(GO) build -o /dev/null ./cmd/paddock

unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /integration)

integration:
	scripts/cgroup-setup.sh
	$(GO) test -count=1 -timeout 20m ./integration/ -args -paddock.bin=$(CURDIR)/$(BIN)
	PADDOCK_TEST_RUNTIME=crun $(GO) test -count=1 -timeout 10m -run 'TestConformance' ./integration/ -args -paddock.bin=$(CURDIR)/$(BIN)

## sdk-python: the Python SDK's tests (unit, against a real paddockd, and the examples against bin/paddock-fakemodel)
sdk-python: build
	cd sdk/python && PADDOCK_BIN=$(CURDIR)/$(BIN) PADDOCK_FAKEMODEL_BIN=$(CURDIR)/$(BIN)/paddock-fakemodel python3 -m unittest discover -s tests -v

## sdk-typescript: the TypeScript SDK (build, tests against a real paddockd) and its examples (against bin/paddock-fakemodel), as root
sdk-typescript: build
	cd sdk/typescript && npm ci --no-audit --no-fund && npm run build && PADDOCK_BIN=$(CURDIR)/$(BIN) npm test
	cd examples/typescript && npm ci --no-audit --no-fund && PADDOCK_BIN=$(CURDIR)/$(BIN) PADDOCK_FAKEMODEL_BIN=$(CURDIR)/$(BIN)/paddock-fakemodel npm test

## bench: the benchmarks of docs/benchmarks.md (create/exec/bare, warm pool, lifecycle: pause/resume, stop/start, auto-resume)
bench: build
	scripts/cgroup-setup.sh
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 200x ./integration/ -args -paddock.bin=$(CURDIR)/$(BIN)

## soak: the chaos soak of docs/benchmarks.md (N sandboxes, T, K daemon SIGKILLs)
SOAK_N ?= 8
SOAK_T ?= 60s
SOAK_K ?= 4
soak: build
	scripts/cgroup-setup.sh
	$(GO) test -count=1 -v -timeout 60m -run TestSoak ./integration/ -args -paddock.bin=$(CURDIR)/$(BIN) -paddock.soak -paddock.soak.n=$(SOAK_N) -paddock.soak.t=$(SOAK_T) -paddock.soak.kills=$(SOAK_K)

## up: install what is needed, build, and start paddockd (prints the URL and an API key)
up:
	scripts/up.sh

clean:
	rm -rf $(BIN)
