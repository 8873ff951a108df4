# placement-guard
#
# Every tool and cluster binary is built from source, pinned by the go.mod
# files under hack/tools, into bin/. A binary is rebuilt only when the go.mod
# that pins it changes, so a second run of any target builds nothing.

IMG ?= placement-guard:latest
LOCALBIN ?= $(CURDIR)/bin
KUBE_VERSION ?= v1.37.2
# The oldest Kubernetes the CRD installs on (the bundle's minKubeVersion): the
# CEL format library its rules use reaches new expressions in 1.32. The API
# suite runs on it as well as on KUBE_VERSION (make test-oldest-kube).
OLDEST_KUBE_VERSION ?= v1.32.5
OLDEST_KUBE_MINOR = 1.32
OLDEST_KUBE = $(LOCALBIN)/k8s-oldest
GO ?= go
# Every build is static and path-free, as the image's and the tools' are, so
# that tests, lint, the image and the tools share one build-cache entry per
# package instead of compiling each once per flavour (the cold make test).
export CGO_ENABLED ?= 0
export GOFLAGS += -trimpath
# One Go for every module, fetched through the module proxy when the
# machine's is another: a package is compiled once for all of them only by
# one compiler (Karpenter's module needs Go 1.26.9 or newer, and the
# standard library alone is two minutes of a cold build's CPU).
GO_TOOLCHAIN ?= go1.26.10
export GOTOOLCHAIN = $(GO_TOOLCHAIN)
GOTEST_FLAGS ?=
# The e2e suites start a cluster each; allow them time on a 2-core machine.
GOTEST_TIMEOUT ?= 40m

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
KUSTOMIZE ?= $(LOCALBIN)/kustomize
BENCHSTAT ?= $(LOCALBIN)/benchstat
GINKGO ?= $(LOCALBIN)/ginkgo
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint
HELM ?= $(LOCALBIN)/helm
CRD_REF_DOCS ?= $(LOCALBIN)/crd-ref-docs
HELM_VERSION ?= v4.3.1
KUBECTL ?= $(LOCALBIN)/kubectl
CLUSTER_BINARIES = $(LOCALBIN)/kube-apiserver $(LOCALBIN)/kube-controller-manager \
	$(LOCALBIN)/kube-scheduler $(LOCALBIN)/kubectl $(LOCALBIN)/etcd $(LOCALBIN)/kwok \
	$(LOCALBIN)/kwok-stages.yaml

# Karpenter's kwok provider, run out of cluster by the autoscaler specs of
# the e2e suite, with the CRDs of its module (NodePools, NodeClaims,
# CapacityBuffers, the KWOKNodeClass), on the Kubernetes libraries the other
# modules compile (hack/modsync).
KARPENTER = $(LOCALBIN)/karpenter-kwok $(LOCALBIN)/karpenter-crds

# The version the control plane reports, as the Kubernetes release build sets it.
KUBE_LDFLAGS = -s -w \
	-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=37 \
	-X k8s.io/component-base/version.gitTreeState=clean \
	-X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/client-go/pkg/version.gitMajor=1 \
	-X k8s.io/client-go/pkg/version.gitMinor=37 \
	-X k8s.io/client-go/pkg/version.gitTreeState=clean

# Where the cluster binaries are found by envtest and by test/localcluster.
export KUBEBUILDER_ASSETS = $(LOCALBIN)
export PLACEMENT_GUARD_BIN = $(LOCALBIN)

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD, the RBAC ClusterRole and the webhook configuration from the kubebuilder markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths="./api/...;./internal/...;./cmd/..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate the DeepCopy methods of the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## Run go fmt.
	$(GO) fmt ./...

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: modsync
modsync: ## Raise the modules the tests compile (operator, fidelity, kubernetes, etcd, kwok, helm, dev tools) to one version each, so each is compiled once.
	$(GO) run ./hack/modsync -fix

.PHONY: api-docs
api-docs: $(CRD_REF_DOCS) ## Generate docs/reference/api.md from the API types in api/.
	$(CRD_REF_DOCS) --config hack/api-docs/config.yaml --source-path api --renderer markdown \
		--output-mode single --output-path docs/reference/api.md --log-level ERROR

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint v2 with kube-api-linter on api/ (.golangci.yml says what runs and each exception's reason).
	$(GOLANGCI_LINT) run ./...

# The tools verify runs, built two at a time first (see TEST_BINARIES).
VERIFY_TOOLS = $(CONTROLLER_GEN) $(KUSTOMIZE) $(CRD_REF_DOCS) $(GOLANGCI_LINT)

.PHONY: verify-tools
verify-tools:
	$(MAKE) --no-print-directory -j2 --output-sync=target $(VERIFY_TOOLS)

.PHONY: verify
verify: verify-tools verify-generated verify-lint ## Lint, regenerate code, manifests, the chart and the API reference, and fail if anything committed is stale.

# verify-generated regenerates what is generated and fails when the
# committed files differ; verify-lint reads the sources without writing
# any. .ci/run runs the second beside the tests, at the lowest priority.
.PHONY: verify-generated
verify-generated: generator-tools manifests generate chart bundle api-docs
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'go mod tidy'"; exit 1; }
	@cd test/schedulerfidelity && $(GO) mod tidy -diff || { echo "test/schedulerfidelity's go.mod/go.sum are not tidy: run 'go mod tidy' there"; exit 1; }
	@cd test/gates && $(GO) mod tidy -diff || { echo "test/gates' go.mod/go.sum are not tidy: run 'go mod tidy' there"; exit 1; }
	@test -z "$$(gofmt -l api cmd internal test hack)" || { echo "not gofmt'ed:"; gofmt -l api cmd internal test hack; exit 1; }
	@git diff --exit-code -- api config internal cmd dist/chart bundle docs/reference || { echo "generated files are stale: run 'make manifests generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config dist/chart bundle docs/reference)" || { echo "untracked generated files:"; git status --porcelain -- api config dist/chart bundle docs/reference; exit 1; }

.PHONY: generator-tools
generator-tools:
	$(MAKE) --no-print-directory -j2 --output-sync=target $(CONTROLLER_GEN) $(KUSTOMIZE) $(CRD_REF_DOCS)

.PHONY: verify-lint
verify-lint: lint
	$(GO) run ./hack/modsync
	$(GO) run ./hack/kindrule
	$(GO) run ./hack/layerrule

# What the tests run besides the code under test. `make test` builds these two
# at a time: on a cold clone each build spends its first minute downloading
# modules and its last ones linking on one core, which the other fills.
TEST_BINARIES = cluster-binaries $(KARPENTER) $(KUSTOMIZE) $(HELM) $(GINKGO)
# What only the last suite needs: the oldest kube-apiserver, built at the
# lowest priority from the start of make test, on the CPU the rest leaves
# idle (vet and the builds wait on their longest chains of packages and
# link on one core; the suites wait on controllers). It shares no package
# with the other builds, so none is compiled twice.
LATE_TEST_BINARIES = $(OLDEST_KUBE)/kube-apiserver $(OLDEST_KUBE)/etcd

.PHONY: test-binaries
test-binaries: $(TEST_BINARIES) $(LATE_TEST_BINARIES) $(LOCALBIN)/etcd ## Build the cluster binaries and tools the tests run (Karpenter's kwok provider and the oldest kube-apiserver too).

# SKIP_GENERATE=1 when the generated files were just regenerated and checked
# (.ci/run runs make verify-generated first).
.PHONY: test
test: $(if $(SKIP_GENERATE),,manifests generate) fmt ## Run every test: unit, envtest integration and e2e on a local cluster, the in-process scheduler comparison, and the API suite and a fleet of mixed versions on the oldest Kubernetes.
	$(MAKE) --no-print-directory -j2 test-main test-late-builds
	$(call phase,the fleet gates on the tools' own code and CRDs)
	cd test/gates && $(GO) test ./... -timeout $(GOTEST_TIMEOUT) $(GOTEST_FLAGS)
	KUBEBUILDER_ASSETS=$(OLDEST_KUBE) PLACEMENT_GUARD_EXPECT_KUBE_MINOR=$(OLDEST_KUBE_MINOR) $(GO) test ./api/... $(GOTEST_FLAGS)
	PLACEMENT_GUARD_OLDEST_KUBE=$(OLDEST_KUBE) $(GO) test ./internal/plugin -run '^TestFleetAcrossLiveClusters$$' -count=1 $(GOTEST_FLAGS)
	$(call phase,done)

# test-main vets, builds the tests' binaries, then runs the suites, with
# the fidelity module's packages (Kubernetes' scheduler, whose packages
# the built kube-scheduler has put in the build cache) compiled beside
# them at the lowest priority.
.PHONY: test-main
test-main: vet
	$(call phase,the tests' binaries)
	$(MAKE) --no-print-directory -j2 --output-sync=target $(TEST_BINARIES)
	$(call phase,the suites)
	$(MAKE) --no-print-directory -j2 test-suites test-fidelity-build

# phase prints the time a phase of make test begins at: CI's log then
# shows where its minutes go.
phase = @echo "=== $$(date -u +%T) $(1)"

# The suites run two at a time, the longest first: the e2e suite beside
# the fault matrix, then the other packages, the scheduler agreement and
# the in-process fidelity comparison, each starting when a slot frees. Three suites at a
# time overload 2 cores: the fault matrix's 54 copies of F1 then miss their
# 12 minutes. E2E_PROCS > 1 spreads the e2e specs over that many processes
# (ginkgo -p; they wait on controllers far more than they compute): with 3
# the suite took 693 s instead of 1,523 s in a cold CI run, but in another
# two of its 94 specs timed out under the load of a cold build beside it.
# Two processes share the suite's one cluster by default: 1,010 s instead
# of 1,625 s in a clean-clone CI run, every spec passing.
E2E_PROCS ?= 2
E2E_PARALLEL = $(if $(filter-out 1,$(E2E_PROCS)),-p --procs=$(E2E_PROCS))
GOTEST_PARALLEL ?= 2

.PHONY: test-suites
test-suites:
	$(MAKE) --no-print-directory -j$(GOTEST_PARALLEL) --output-sync=target suite-e2e suite-faults suite-packages suite-agreement suite-fidelity

.PHONY: suite-e2e suite-faults suite-packages suite-agreement suite-fidelity
suite-e2e: $(GINKGO)
	$(GINKGO) $(E2E_PARALLEL) --timeout=$(GOTEST_TIMEOUT) $(GINKGO_FLAGS) ./test/e2e
suite-faults:
	$(GO) test ./test/faults/... -timeout $(GOTEST_TIMEOUT) $(GOTEST_FLAGS)
suite-agreement:
	$(GO) test ./test/scheduleragreement/... -timeout $(GOTEST_TIMEOUT) $(GOTEST_FLAGS)
# The in-process comparison with kube-scheduler's plugins (its own module),
# in the slot the agreement frees while the other packages still run.
suite-fidelity:
	cd test/schedulerfidelity && $(GO) test ./... -timeout $(GOTEST_TIMEOUT) $(GOTEST_FLAGS)
# Every other package, one at a time: the slot beside holds a suite.
suite-packages:
	$(GO) test -p 1 $$($(GO) list ./... | grep -v -e /test/e2e -e /test/faults -e /test/scheduleragreement) -timeout $(GOTEST_TIMEOUT) $(GOTEST_FLAGS)

.PHONY: test-late-builds test-fidelity-build
test-late-builds:
	nice -n 19 $(MAKE) --no-print-directory $(LATE_TEST_BINARIES)
	$(call phase,the oldest kube-apiserver is built)
# The fidelity module's packages, compiled into the build cache without
# running a test.
test-fidelity-build:
	cd test/schedulerfidelity && nice -n 19 $(GO) test -count=1 -run '^$$' ./... > /dev/null

.PHONY: test-oldest-kube
test-oldest-kube: $(OLDEST_KUBE)/kube-apiserver $(OLDEST_KUBE)/etcd $(LOCALBIN)/etcd ## Run the API suite (CRD schema, defaults, CEL rules) on the oldest Kubernetes the bundle claims.
	KUBEBUILDER_ASSETS=$(OLDEST_KUBE) PLACEMENT_GUARD_EXPECT_KUBE_MINOR=$(OLDEST_KUBE_MINOR) $(GO) test ./api/... -count=1 -v $(GOTEST_FLAGS)

.PHONY: demo
demo: cluster-binaries ## Start a local cluster, run the operator and play incident 000 (the graph DB waits for its second data node).
	$(GO) run ./hack/demo

.PHONY: demo-fleet
demo-fleet: cluster-binaries ## Start two local clusters (one data node, two data nodes), plan incident 000's migration across both, apply it, and watch one succeed while the other waits for capacity.
	$(GO) run ./hack/demo-fleet

.PHONY: test-unit
test-unit: ## Run the unit tests only (no cluster binaries needed).
	$(GO) test ./internal/... ./api/... -short $(GOTEST_FLAGS)

.PHONY: test-e2e
test-e2e: cluster-binaries $(KARPENTER) $(KUSTOMIZE) $(HELM) $(GINKGO) ## Run the e2e tests on a local cluster (etcd, kube-apiserver, controller-manager, scheduler, kwok), specs over E2E_PROCS processes.
	$(GINKGO) $(E2E_PARALLEL) --timeout=$(GOTEST_TIMEOUT) -v $(GINKGO_FLAGS) ./test/e2e

.PHONY: test-faults
test-faults: cluster-binaries ## Run the fault matrix: the operator's binary behind a fault proxy on a local cluster, killed, hung, refused, raced (docs/reliability.md).
	$(GO) test ./test/faults/... -timeout $(GOTEST_TIMEOUT) -v $(GOTEST_FLAGS)

.PHONY: test-fidelity
test-fidelity: ## Compare the placement engine in-process with kube-scheduler's own plugins on 20,000 seeded scenarios (PLACEMENT_GUARD_FIDELITY_CASES, _SEED).
	cd test/schedulerfidelity && $(GO) test ./... -count=1 -v $(GOTEST_FLAGS)

FUZZTIME ?= 10m
.PHONY: fuzz-fidelity
fuzz-fidelity: ## Fuzz the in-process comparison with kube-scheduler's plugins for FUZZTIME (10m); a failure prints the shrunk scenario.
	cd test/schedulerfidelity && $(GO) test -run '^$$' -fuzz '^FuzzFidelity$$' -fuzztime $(FUZZTIME) .

.PHONY: bench
bench: $(BENCHSTAT) ## Run the placement engine's and the admission check's benchmarks (the webhook, and one judgement on the benchmark cluster) on one core, 6 samples, and summarise them with benchstat.
	$(GO) test ./internal/placement/ -run '^$$' -bench . -benchtime 10x -count 6 -cpu 1 $(GOTEST_FLAGS) | tee bench.txt
	$(GO) test ./internal/webhook/ -run '^$$' -bench . -benchmem -count 6 -cpu 1 $(GOTEST_FLAGS) | tee -a bench.txt
	$(GO) test ./internal/admission/ -run '^$$' -bench 'Judge(Large|Stream)' -benchtime 1000x -count 3 -cpu 1 $(GOTEST_FLAGS) | tee -a bench.txt
	$(BENCHSTAT) bench.txt

BENCH_SCALE_ARGS ?=
.PHONY: bench-scale
bench-scale: cluster-binaries $(KUSTOMIZE) ## Measure the manager on a local cluster of 1,000 kwok nodes and 30,000 pods: memory per pod, cache sync, churn, node-to-apply latency. Memory and sync alone at 150,000 pods: BENCH_SCALE_ARGS="-store-only -nodes 5000 -pods 150000".
	$(GO) run ./hack/benchscale $(BENCH_SCALE_ARGS)

##@ Build

.PHONY: build
build: generate fmt vet ## Build the manager binary.
	$(GO) build -o $(LOCALBIN)/manager ./cmd

.PHONY: plugin
plugin: ## Build the kubectl plugin into bin/kubectl-placement (put bin/ on PATH to run it as `kubectl placement`).
	$(GO) build -trimpath -ldflags "$(PLUGIN_LDFLAGS)" -o $(LOCALBIN)/kubectl-placement ./cmd/kubectl-placement

# The plugin's release: one archive per platform, built reproducibly (no
# paths, fixed mtime and owner, gzip without a timestamp), and the krew
# manifest rendered with their checksums.
PLUGIN_VERSION ?= $(shell git describe --tags --match 'v*' --dirty 2>/dev/null || echo v0.0.0-$$(git rev-parse --short HEAD))
PLUGIN_BASE_URL ?= https://github.com/placement-guard/placement-guard/releases/download/$(PLUGIN_VERSION)
PLUGIN_PLATFORMS = linux_amd64 linux_arm64 darwin_amd64 darwin_arm64
PLUGIN_LDFLAGS = -s -w -X github.com/placement-guard/placement-guard/internal/plugin.Version=$(PLUGIN_VERSION)
DIST ?= $(CURDIR)/dist

.PHONY: plugin-dist
plugin-dist: ## Build the plugin's archives for linux and darwin, amd64 and arm64, and the krew manifest, into dist/.
	mkdir -p $(DIST) && rm -f $(DIST)/kubectl-placement_*.tar.gz $(DIST)/SHA256SUMS $(DIST)/placement.yaml
	set -e; manifest=$$(cat config/krew/placement.yaml); \
	for p in $(PLUGIN_PLATFORMS); do \
		os=$${p%_*}; arch=$${p#*_}; dir=$(DIST)/$$p; mkdir -p $$dir; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(PLUGIN_LDFLAGS)" -o $$dir/kubectl-placement ./cmd/kubectl-placement; \
		cp LICENSE $$dir/; \
		archive=$(DIST)/kubectl-placement_$(PLUGIN_VERSION)_$$p.tar.gz; \
		tar -C $$dir --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - kubectl-placement LICENSE | gzip -n > $$archive; \
		rm -rf $$dir; \
		sum=$$(sha256sum $$archive | cut -d' ' -f1); \
		manifest=$${manifest//"\$${SHA256_$$p}"/$$sum}; \
	done; \
	manifest=$${manifest//'$${VERSION}'/$(PLUGIN_VERSION)}; \
	manifest=$${manifest//'$${BASE_URL}'/$(PLUGIN_BASE_URL)}; \
	printf '%s\n' "$$manifest" > $(DIST)/placement.yaml
	cd $(DIST) && sha256sum kubectl-placement_*.tar.gz > SHA256SUMS
	@echo "dist/: $$(ls $(DIST) | tr '\n' ' ')"

.PHONY: run
run: manifests generate fmt vet ## Run the manager against the cluster in the current kubeconfig.
	$(GO) run ./cmd

.PHONY: bundle
bundle: manifests $(KUSTOMIZE) ## Generate the OLM bundle in bundle/ from config/ (CRD, CSV with the manager's install strategy, annotations, scorecard).
	$(KUSTOMIZE) build config/default | $(GO) run ./hack/bundle bundle

.PHONY: build-installer
# The digest `make image` gave the image, when it has run: install.yaml then
# pins the manager's image by digest (the same one `make image-push` pushes).
IMAGE_DIGEST ?= $(shell sed -n 's/.*"digest": *"\(sha256:[a-f0-9]*\)".*/\1/p' $(DIST)/image/index.json 2>/dev/null | head -1)

build-installer: manifests $(KUSTOMIZE) ## Write dist/install.yaml: the CRD, RBAC and manager in one file, the image IMG (pinned by digest after make image).
	mkdir -p $(DIST)
	rm -rf $(DIST)/.installer && cp -r config $(DIST)/.installer
	cd $(DIST)/.installer/manager && $(KUSTOMIZE) edit set image controller=$(IMG)$(if $(IMAGE_DIGEST),@$(IMAGE_DIGEST))
	$(KUSTOMIZE) build $(DIST)/.installer/default > $(DIST)/install.yaml
	rm -rf $(DIST)/.installer
	@echo "wrote $(DIST)/install.yaml for $(IMG)$(if $(IMAGE_DIGEST),@$(IMAGE_DIGEST))"

# The manager's image, built without a Docker engine by hack/tools/image
# (go-containerregistry): static binaries, one layer, user 65532, no shell,
# every timestamp the epoch, so one commit gives one digest.
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
IMAGE_VERSION ?= $(PLUGIN_VERSION)
IMAGE_REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
IMAGE_LABELS = org.opencontainers.image.title=placement-guard \
	org.opencontainers.image.source=https://github.com/placement-guard/placement-guard \
	org.opencontainers.image.licenses=Apache-2.0 \
	org.opencontainers.image.version=$(IMAGE_VERSION) \
	org.opencontainers.image.revision=$(IMAGE_REVISION)
IMAGE_ARGS = $(foreach p,$(IMAGE_PLATFORMS),-binary $(p)=$(DIST)/image-build/$(subst /,_,$(p))/manager) \
	$(foreach l,$(IMAGE_LABELS),-label $(l))

.PHONY: image-binaries
image-binaries:
	set -e; for p in $(IMAGE_PLATFORMS); do \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -ldflags "-s -w" -o $(DIST)/image-build/$${p/\//_}/manager ./cmd; \
	done

.PHONY: image
image: image-binaries ## Build the manager's multi-arch image without Docker: dist/image (OCI layout) and dist/image_linux_*.tar (docker load).
	cd hack/tools/image && $(GO) run . $(IMAGE_ARGS) -layout $(DIST)/image -tarball-dir $(DIST) -tag $(IMG)
	rm -rf $(DIST)/image-build

.PHONY: image-push
image-push: image-binaries ## Build the image and push it to IMG (a registry you can write to; credentials from ~/.docker/config.json).
	cd hack/tools/image && $(GO) run . $(IMAGE_ARGS) -push $(IMG)
	rm -rf $(DIST)/image-build

.PHONY: chart
chart: manifests $(KUSTOMIZE) ## Regenerate the Helm chart's CRD, RBAC and policy templates (dist/chart/templates) from config/.
	rm -rf dist/chart/templates/crd dist/chart/templates/rbac dist/chart/templates/policies
	$(KUSTOMIZE) build config/default | $(GO) run ./hack/chart default dist/chart/templates
	$(KUSTOMIZE) build config/policies | $(GO) run ./hack/chart policies dist/chart/templates

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine).
	docker build -t $(IMG) .

##@ Deployment

.PHONY: install
install: manifests $(KUSTOMIZE) $(KUBECTL) ## Install the CRD into the cluster in the current kubeconfig.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: manifests $(KUSTOMIZE) $(KUBECTL) ## Remove the CRD from the cluster in the current kubeconfig.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy
deploy: manifests $(KUSTOMIZE) $(KUBECTL) ## Deploy the operator to the cluster in the current kubeconfig.
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/default | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: $(KUSTOMIZE) $(KUBECTL) ## Remove the operator from the cluster in the current kubeconfig.
	$(KUSTOMIZE) build config/default | $(KUBECTL) delete --ignore-not-found -f -

##@ Tools and cluster binaries (built from source into bin/)

.PHONY: tools
tools: $(CONTROLLER_GEN) $(KUSTOMIZE) $(BENCHSTAT) $(GOLANGCI_LINT) $(HELM) $(CRD_REF_DOCS) ## Build controller-gen, kustomize, benchstat, golangci-lint, helm and crd-ref-docs.

.PHONY: cluster-binaries
cluster-binaries: $(CLUSTER_BINARIES) ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok.

$(LOCALBIN):
	mkdir -p $(LOCALBIN)

$(CONTROLLER_GEN): hack/tools/dev/go.mod hack/tools/dev/go.sum | $(LOCALBIN)
	cd hack/tools/dev && $(GO) build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(KUSTOMIZE): hack/tools/dev/go.mod hack/tools/dev/go.sum | $(LOCALBIN)
	cd hack/tools/dev && $(GO) build -o $@ sigs.k8s.io/kustomize/kustomize/v5

$(BENCHSTAT): hack/tools/dev/go.mod hack/tools/dev/go.sum | $(LOCALBIN)
	cd hack/tools/dev && $(GO) build -o $@ golang.org/x/perf/cmd/benchstat

# Ginkgo's runner, of the version the suites' library is (hack/modsync holds
# the two together): it spreads a suite's specs over processes.
$(GINKGO): hack/tools/dev/go.mod hack/tools/dev/go.sum | $(LOCALBIN)
	cd hack/tools/dev && $(GO) build -o $@ github.com/onsi/ginkgo/v2/ginkgo

# golangci-lint v2 with kube-api-linter compiled in as a module plugin.
$(GOLANGCI_LINT): hack/tools/lint/go.mod hack/tools/lint/go.sum | $(LOCALBIN)
	cd hack/tools/lint && $(GO) build -trimpath -ldflags "-s -w" -o $@ sigs.k8s.io/kube-api-linter/cmd/golangci-lint-kube-api-linter

$(CRD_REF_DOCS): hack/tools/docs/go.mod hack/tools/docs/go.sum | $(LOCALBIN)
	cd hack/tools/docs && $(GO) build -trimpath -ldflags "-s -w" -o $@ github.com/elastic/crd-ref-docs

$(HELM): hack/tools/helm/go.mod hack/tools/helm/go.sum | $(LOCALBIN)
	cd hack/tools/helm && $(GO) build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)" -o $@ helm.sh/helm/v4/cmd/helm

$(LOCALBIN)/kube-apiserver $(LOCALBIN)/kube-controller-manager $(LOCALBIN)/kube-scheduler $(LOCALBIN)/kubectl &: hack/tools/kubernetes/go.mod hack/tools/kubernetes/go.sum | $(LOCALBIN)
	cd hack/tools/kubernetes && $(GO) build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o $(LOCALBIN)/ \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
	touch $(LOCALBIN)/kube-apiserver $(LOCALBIN)/kube-controller-manager $(LOCALBIN)/kube-scheduler $(LOCALBIN)/kubectl

# It serves only the API suite, and shares no package with another build:
# compiled without optimisations (-N -l), which compiles it faster.
$(OLDEST_KUBE)/kube-apiserver: hack/tools/kubernetes-oldest/go.mod hack/tools/kubernetes-oldest/go.sum | $(LOCALBIN)
	mkdir -p $(OLDEST_KUBE)
	cd hack/tools/kubernetes-oldest && $(GO) build -trimpath -o $@ -gcflags=all="-N -l" -ldflags "-s -w \
		-X k8s.io/component-base/version.gitVersion=$(OLDEST_KUBE_VERSION) -X k8s.io/component-base/version.gitMajor=1 \
		-X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(OLDEST_KUBE_MINOR))) -X k8s.io/component-base/version.gitTreeState=clean" \
		k8s.io/kubernetes/cmd/kube-apiserver

# envtest looks for etcd beside kube-apiserver; the current one serves both.
# (The link is made before etcd is built: make test builds it beside.)
$(OLDEST_KUBE)/etcd: | $(LOCALBIN)
	mkdir -p $(OLDEST_KUBE) && ln -sf ../etcd $@

$(LOCALBIN)/etcd: hack/tools/etcd/go.mod hack/tools/etcd/go.sum | $(LOCALBIN)
	cd hack/tools/etcd && $(GO) build -trimpath -ldflags "-s -w" -o $@ go.etcd.io/etcd/server/v3

$(LOCALBIN)/kwok: hack/tools/kwok/go.mod hack/tools/kwok/go.sum | $(LOCALBIN)
	cd hack/tools/kwok && $(GO) build -trimpath -ldflags "-s -w" -o $@ sigs.k8s.io/kwok/cmd/kwok

# kwok exits with "no stages found" unless told how nodes and pods behave: use
# the "fast" stages that ship in the kwok module (nodes become Ready and keep a
# heartbeat; pods become Ready at once and are deleted when asked).
$(LOCALBIN)/kwok-stages.yaml: hack/tools/kwok/go.mod hack/tools/kwok/go.sum | $(LOCALBIN)
	cd hack/tools/kwok && dir=$$($(GO) mod download -json sigs.k8s.io/kwok | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')/kustomize/stage && \
	for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
		pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do \
		echo "---"; cat "$$dir/$$f"; done > $@.tmp && mv $@.tmp $@

.PHONY: karpenter
karpenter: $(KARPENTER) ## Build Karpenter's kwok provider and collect its CRDs into bin/.

$(KARPENTER) &: hack/tools/karpenter/go.mod hack/tools/karpenter/go.sum | $(LOCALBIN)
	cd hack/tools/karpenter && $(GO) build -trimpath -ldflags "-s -w" -o $(LOCALBIN)/karpenter-kwok sigs.k8s.io/karpenter/kwok
	rm -rf $(LOCALBIN)/karpenter-crds.tmp && mkdir -p $(LOCALBIN)/karpenter-crds.tmp && \
	dir=$$(cd hack/tools/karpenter && $(GO) mod download -json sigs.k8s.io/karpenter | sed -n 's/.*"Dir": "\(.*\)".*/\1/p') && \
	for f in charts/crds/karpenter.sh_nodepools.yaml charts/crds/karpenter.sh_nodeclaims.yaml \
		charts/crds/autoscaling.x-k8s.io_capacitybuffers.yaml apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml; do \
		cp "$$dir/kwok/$$f" $(LOCALBIN)/karpenter-crds.tmp/ || exit 1; done && \
	chmod u+w $(LOCALBIN)/karpenter-crds.tmp/* && rm -rf $(LOCALBIN)/karpenter-crds && mv $(LOCALBIN)/karpenter-crds.tmp $(LOCALBIN)/karpenter-crds
	touch $(KARPENTER)

.PHONY: clean
clean: ## Remove the built binaries.
	rm -rf $(LOCALBIN)
