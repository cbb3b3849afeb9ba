# Paddock build and test entry points. `make test` is what CI runs.
GO      ?= go
BIN     ?= bin
RUNSC_VERSION ?= v0.0.0-20260905035102-160fafc42237
RUNSC   ?= /var/cache/paddock/runsc-$(RUNSC_VERSION)
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build console deps console-e2e test unit integration k8s-test k8s-node-test k8s-node-bin k8s-bench k8s-bin crun-test runsc-test lint generate check-generated cross bench bench-perf bench-peers bench-scale bench-surface soak up clean sdk-python sdk-typescript e2b-compat

all: build

## build: the daemon, the CLI, the static guest agent, its command shim and its idle program (C), the pinned runc,
## and paddock-fakemodel, the fake model API the SDK tests use (a test tool, not shipped)
build: console
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/paddockd ./cmd/paddockd
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/paddock ./cmd/paddock
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/paddock-gateway ./cmd/paddock-gateway
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/paddock-agent ./cmd/paddock-agent
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/paddock-shim ./cmd/paddock-shim
	$(CC) -static -Os -s -Wall -Wextra -Werror -o $(BIN)/paddock-idle cmd/paddock-idle/main.c
	$(GO) build -tags seccomp -o $(BIN)/runc github.com/opencontainers/runc
	$(GO) build -o $(BIN)/paddock-fakemodel ./internal/fakemodel/cmd/paddock-fakemodel

## console: the web console's assets (TypeScript in internal/console/web, pinned npm
## dependencies, bundled by esbuild into internal/console/dist, which paddockd embeds)
console:
	cd internal/console/web && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build

## console-e2e: the console driven by playwright-core in Debian's chromium (headless)
## against a real paddockd: sign-in, terminal, files, plots, lifecycle, template build,
## tenants, escaping, keyboard only; and in Debian's firefox-esr over WebDriver BiDi
console-e2e: build
	scripts/cgroup-setup.sh
	cd internal/console/web && PADDOCK_BIN=$(CURDIR)/$(BIN) npm run --silent e2e

## k8s-test: cluster mode end to end on a real Kubernetes control plane (etcd + kube-apiserver of
## the k8s-lab, built once into a cache keyed by version): 3 paddockd nodes, 2 gateways (as root)
K8S_VERSION ?= v1.37.2
K8S_BIN ?= /var/cache/paddock/k8s-$(K8S_VERSION)/bin
## the unchanged Go SDK suite through a gateway (TestSDKSuiteThroughGateway) and the unmodified e2b npm
## package through a gateway's E2B endpoint (TestE2BSDKThroughGateway, integration/e2b-sdk's pinned
## packages); then fails if any process of the lab survived (scripts/k8s-leftovers.sh)
k8s-test: build k8s-bin
	scripts/cgroup-setup.sh
	cd integration/e2b-sdk && npm ci --no-audit --no-fund
	$(GO) test -c -o $(BIN)/integration.test ./integration/
	$(GO) test -count=1 -timeout 15m ./integration/cluster/ -args -paddock.bin=$(CURDIR)/$(BIN) -k8s.bin=$(K8S_BIN) \
		-integration.test=$(CURDIR)/$(BIN)/integration.test; rc=$$?; scripts/k8s-leftovers.sh $(K8S_BIN) || rc=1; exit $$rc

## k8s-node-test: the pod backend and the manifests on a real Kubernetes node (kubelet + containerd +
## runc + CNI + kube-proxy in a network namespace: scripts/k8s-node.sh; as root): the Backend conformance
## suite of internal/backend/pod, paddockd --backend=pod through its API (TestPodModeAPI) and
## deploy/kubernetes' DaemonSet running a nested sandbox, then its gateways through their Service's
## ClusterIP and a NodePort, also with one gateway pod deleted (TestManifestsNestedSandbox); then nothing
## of the node may be left (processes, netns, mounts, cgroups, kube-proxy's rules)
K8S_NODE_LAB ?= /tmp/paddock-k8s-node
K8S_NODE_SH = K8S_BIN=$(K8S_BIN) LAB=$(K8S_NODE_LAB) scripts/k8s-node.sh
k8s-node-test: build k8s-node-bin
	scripts/cgroup-setup.sh
	$(GO) test -c -o $(BIN)/pod.test ./internal/backend/pod/
	$(GO) test -c -o $(BIN)/cluster.test ./integration/cluster/
	$(K8S_NODE_SH) down >/dev/null; $(K8S_NODE_SH) up || { $(K8S_NODE_SH) down; exit 1; }
	rc=0; NSX="nsenter --net=/run/netns/paddock-k8s"; \
	$$NSX $(BIN)/pod.test -test.count=1 -test.timeout 10m -test.run TestConformance -pod.kubeconfig=$(K8S_NODE_LAB)/kubeconfig \
		-pod.ctr=$(K8S_BIN)/ctr -pod.containerd=$(K8S_NODE_LAB)/node/containerd.sock || rc=1; \
	(cd integration/cluster && $$NSX $(CURDIR)/$(BIN)/cluster.test -test.count=1 -test.timeout 10m -test.v -test.run 'TestPodModeAPI|TestManifestsNestedSandbox' \
		-paddock.bin=$(CURDIR)/$(BIN) -k8s.bin=$(K8S_BIN) -k8s.node=$(K8S_NODE_LAB)) || rc=1; \
	$(K8S_NODE_SH) down; $(K8S_NODE_SH) check || rc=1; exit $$rc

## k8s-node-bin: k8s-bin plus the node's kubelet, kube-scheduler, kube-controller-manager, kube-proxy and containerd
## (+ shim, ctr) in $(K8S_BIN), built only when missing (K8S_NODE=1 scripts/k8s-bin.sh)
k8s-node-bin: k8s-bin
	K8S_NODE=1 K8S_VERSION=$(K8S_VERSION) K8S_BIN=$(K8S_BIN) scripts/k8s-bin.sh

## k8s-bench: create -> first result through a gateway vs directly on a node, and creates/s over 3 nodes (as root)
k8s-bench: build k8s-bin
	$(GO) test -count=1 -timeout 15m -run '^$$' -bench 'BenchmarkCluster' -benchtime 10x ./integration/cluster/ -args -paddock.bin=$(CURDIR)/$(BIN) -k8s.bin=$(K8S_BIN)

## k8s-bin: the lab's etcd and kube-apiserver in $(K8S_BIN), built only when missing (scripts/k8s-bin.sh)
k8s-bin:
	K8S_VERSION=$(K8S_VERSION) K8S_BIN=$(K8S_BIN) scripts/k8s-bin.sh

## deps: install the system packages the build and the tests need (Debian/Ubuntu, as root)
deps:
	scripts/deps.sh

## test: everything CI runs (as root): lint, unit tests, integration tests against runc, crun and gVisor (runsc-test first: it provides bin/runsc), the Kubernetes cluster tests (k8s-test; its binaries are built once into $(K8S_BIN)) and the real-node tests (k8s-node-test), the SDK suites, the unmodified E2B SDKs and the web console in chromium and firefox-esr
test: deps build lint check-generated cross unit runsc-test integration k8s-test k8s-node-test sdk-python sdk-typescript e2b-compat console-e2e

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1)
	$(GO) vet ./...

## generate: write what derives from api/openapi.yaml, the one source of the API contract: the Go wire types and error table (api/*.gen.go) and the SDK types and error classes
## (one file per x-file group of schemas in each language, plus the modules re-exporting them: see internal/apigen)
GENERATED := 'api/*.gen.go' 'sdk/typescript/src/*.gen.ts' 'sdk/python/src/paddock/_*_gen*.py'
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

## runsc-test: under gVisor (systrap), the Backend conformance suite and a "runtime": "runsc" template end to end through paddockd
## (runsc built once by scripts/deps.sh into $(RUNSC); about 5 minutes cold on 2 cores, then about 25 s)
runsc-test: build
	RUNSC_VERSION=$(RUNSC_VERSION) scripts/deps.sh
	cp $(RUNSC) $(BIN)/runsc
	scripts/cgroup-setup.sh
	$(GO) test -count=1 -timeout 5m -run 'TestConformance' ./internal/backend/container/ -args -paddock.bin=$(CURDIR)/$(BIN) -paddock.runtime=runsc -paddock.runtime-path=$(CURDIR)/$(BIN)/runsc
	$(GO) test -count=1 -timeout 5m -run 'TestTemplateRuntimeGVisor' ./integration/ -args -paddock.bin=$(CURDIR)/$(BIN)

## sdk-python: the Python SDK's tests (unit, against a real paddockd, and the examples against bin/paddock-fakemodel)
sdk-python: build
	cd sdk/python && PADDOCK_BIN=$(CURDIR)/$(BIN) PADDOCK_FAKEMODEL_BIN=$(CURDIR)/$(BIN)/paddock-fakemodel python3 -m unittest discover -s tests -v

## sdk-typescript: the TypeScript SDK (build, tests against a real paddockd) and its examples (against bin/paddock-fakemodel), as root
sdk-typescript: build
	cd sdk/typescript && npm ci --no-audit --no-fund && npm run build && PADDOCK_BIN=$(CURDIR)/$(BIN) npm test
	cd examples/typescript && npm ci --no-audit --no-fund && PADDOCK_BIN=$(CURDIR)/$(BIN) PADDOCK_FAKEMODEL_BIN=$(CURDIR)/$(BIN)/paddock-fakemodel npm test

## e2b-compat: the unmodified e2b npm SDK (pinned in integration/e2b-sdk) against a real paddockd's E2B-compatible endpoint, as root
e2b-compat: build
	scripts/cgroup-setup.sh
	cd integration/e2b-sdk && npm ci --no-audit --no-fund && PADDOCK_BIN=$(CURDIR)/$(BIN) npm test

## bench: the benchmarks of docs/benchmarks.md (create/exec/bare, warm pool, lifecycle: pause/resume, stop/start, auto-resume), then bench-perf
bench: build
	scripts/cgroup-setup.sh
	$(GO) test -count=1 -run '^$$' -bench '^Benchmark(Latency|Code|Capacity|Lifecycle|NetworkOnOff|NoisyNeighbor|Pool|Surface|Terminal)$$' -benchtime 200x ./integration/ -args -paddock.bin=$(CURDIR)/$(BIN)
	$(MAKE) bench-perf

## bench-perf: issue 14's figures (idle CPU with 0 and N idle sandboxes, host memory per idle sandbox, the first exec into a sandbox whose agent hibernated, delete latency, deleting N at once, create → first result cold and pooled, cold under runc vs crun (crun with its compiled seccomp filter handed back), sustained cycles with the pool off and on, exec vs bare, the agent's peak memory for capped output); BASELINE=<git ref> also builds that ref and runs its daemon alongside, interleaved
BASELINE ?=
BENCH_BASE_DIR ?= /tmp/paddock-bench-baseline
bench-perf: build
	scripts/cgroup-setup.sh
	@if [ -n "$(BASELINE)" ]; then rm -rf $(BENCH_BASE_DIR) && mkdir -p $(BENCH_BASE_DIR)/src && \
		git archive $(BASELINE) | tar -x -C $(BENCH_BASE_DIR)/src && \
		$(MAKE) -C $(BENCH_BASE_DIR)/src build BIN=$(BENCH_BASE_DIR)/bin; fi
	$(GO) test -count=1 -run '^$$' -bench '^Benchmark(Idle|IdleMemory|Wake|Delete|MassDelete|Create|CreateRuntimes|Cycles|Exec|AgentMemory)$$' -benchtime 1x -timeout 30m ./integration/ -args -paddock.bin=$(CURDIR)/$(BIN) $(if $(BASELINE),-paddock.baseline.bin=$(BENCH_BASE_DIR)/bin)

## bench-scale: issue 14's scale figures, not part of test or bench: SCALE_N idle sandboxes held on one daemon while another tenant's exec p50/p99 is measured, then SCALE_DELETE_N of them deleted at once (answered, host clean) while the rest stay, then the rest; with BASELINE=<git ref>, first BenchmarkMassDelete of SCALE_DELETE_N for this build and the baseline's. Raises kernel.pid_max first (every agent thread is a task).
SCALE_DELETE_N ?= 2000
SCALE_N ?= 5000
bench-scale: build
	scripts/cgroup-setup.sh
	@if [ "$$(cat /proc/sys/kernel/pid_max)" -lt 4194304 ]; then sysctl -qw kernel.pid_max=4194304; fi
	@if [ -n "$(BASELINE)" ]; then rm -rf $(BENCH_BASE_DIR) && mkdir -p $(BENCH_BASE_DIR)/src && \
		git archive $(BASELINE) | tar -x -C $(BENCH_BASE_DIR)/src && \
		$(MAKE) -C $(BENCH_BASE_DIR)/src build BIN=$(BENCH_BASE_DIR)/bin && \
		$(GO) test -count=1 -run '^$$' -bench '^BenchmarkMassDelete$$' -benchtime 1x -timeout 60m ./integration/ -args -paddock.bin=$(CURDIR)/$(BIN) -paddock.bench.n=$(SCALE_DELETE_N) -paddock.baseline.bin=$(BENCH_BASE_DIR)/bin; fi
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkScaleIdle$$' -benchtime 1x -timeout 90m ./integration/ -args -paddock.bin=$(CURDIR)/$(BIN) -paddock.scale.n=$(SCALE_N) -paddock.scale.delete=$(SCALE_DELETE_N)

## bench-peers: Paddock next to podman (run --rm, exec, cp) and bubblewrap, interleaved, same work and limits (installs podman and bubblewrap from Debian's packages when missing; as root; docs/benchmarks.md)
bench-peers: build
	scripts/cgroup-setup.sh
	scripts/peers-deps.sh
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkPeers$$' -benchtime 1x -timeout 40m ./integration/ -args -paddock.bin=$(CURDIR)/$(BIN)

## bench-surface: another tenant's exec latency and the daemon's peak RSS, quiet and under each daemon-surface attack (docs/benchmarks.md)
bench-surface: build
	scripts/cgroup-setup.sh
	$(GO) test -count=1 -run '^$$' -bench BenchmarkSurface -benchtime 1x -timeout 20m ./integration/ -args -paddock.bin=$(CURDIR)/$(BIN)

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
