# Two commands matter: `make dev` and `make test`. Every target first sources
# scripts/env.sh, which installs what is missing (Node 24, npm dependencies,
# the temporal CLI, the Kubernetes test-bed binaries) into a cache outside the
# repository and reuses it afterwards.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
JEST := node --experimental-vm-modules --no-warnings=ExperimentalWarning node_modules/jest/bin/jest.js

.PHONY: help dev demo env test release image test-unit test-workflow test-e2e test-integration test-capi test-production test-nodes lint build bench bench-fleet bench-vs-go bench-machine-updates bench-vm-node bench-readiness chaos clean check-fresh

# Every target is listed here (test/unit/make-help.test.ts checks it, and that the README names only these).
help:
	@echo "make dev        Temporal dev server + worker + HTTPS hook server + a management cluster with Cluster API (MANAGEMENT=none: without; Ctrl-C stops all)"
	@echo "make demo       on a running make dev: upgrade in-memory Clusters two minors through Cluster API, by replacement and in place (DEMO_ARGS='--rolling-only')"
	@echo "make test       lint, typecheck and every test tier, the real-node one last (as root; starts and stops what the tests need)"
	@echo "make env        shell exports: eval \"\$$(make env)\" puts the tool cache's node 24, temporal, kubectl, clusterctl and bin/ (capi-upgrades) on PATH"
	@echo "make lint       eslint, prettier and the typecheck"
	@echo "make build      compile to dist/ (what the image runs)"
	@echo "make clean      remove dist/, coverage/ and .data/ (make dev's Temporal state and certificates)"
	@echo "make test-unit  the unit tier only (no services)"
	@echo "make test-workflow  the workflow tier only (a Temporal dev server; activities stubbed)"
	@echo "make test-e2e   the end-to-end tier only (the extension's processes against a Temporal dev server)"
	@echo "make test-integration  the integration tier only (starts the Kubernetes test bed, Prometheus and Alertmanager)"
	@echo "make test-capi  the real-CAPI tier only: Cluster API's controllers drive the extension (CAPI_VERSION=v1.13.6 CAPI_TEST_VERSION=v1.13.7: another release, docs/compatibility.md)"
	@echo "make test-production  the production-Temporal tier only: Temporal's services on PostgreSQL, 2 api + 2 worker processes"
	@echo "make test-nodes  the real-node tier only: kubeadm clusters on container nodes (systemd-nspawn, containerd, kubelet) upgraded in place by the job executor (root)"
	@echo "make release VERSION=vX.Y.Z [IMAGE=registry/name]  release assets in out/: clusterctl components, metadata.yaml, notes from CHANGELOG.md's [Unreleased], checksums (docs/release.md)"
	@echo "make image [VERSION=vX.Y.Z BUILD_ID=… REVISION=… IMAGE=host:port/name IMAGE_CA=ca.pem]  the Dockerfile's image without Docker: an OCI layout in out/image, reproducible; IMAGE pushes it (docs/release.md)"
	@echo "make check-fresh  make test from a fresh clone of HEAD with empty tool and Go module caches (as a new machine)"
	@echo "make bench      hook server latency/throughput benchmark"
	@echo "make bench-fleet  500 clusters' hooks at 100 req/s against api, worker and Temporal as separate processes (BENCH_ARGS='--clusters 500 --rate 100'; '--profile 10k --temporal production': 10,000 upgrades polled at 1,000 req/s on Temporal's services and PostgreSQL; '--management testbed --request-checks on|off': what the request checks cost; '--profile waiting [--clusters 10000]': a fleet waiting for a window, driven as CAPI drives it)"
	@echo "make bench-vs-go  GenerateUpgradePlan: ours vs Cluster API's Go test extension, same client (BENCH_ARGS='--duration 10 --concurrency 32')"
	@echo "make bench-machine-updates  200 KWOK nodes updated in place, limit 20 (BENCH_ARGS='--nodes 200 --limit 20 --delay 15')"
	@echo "make bench-readiness  what one readiness check costs: CPU and API-server requests per cluster, on a test bed of its own (BENCH_ARGS='--clusters 20 --rounds 3')"
	@echo "make bench-vm-node  a kubeadm node as a TCG virtual machine (qemu, 2 vCPUs): boot, kubeadm init, kubeadm upgrade apply, kubelet restart, timed (root; BENCH_ARGS='--cpus 2 --memory 4096 --no-wait')"
	@echo "make chaos     100 seeded random faults through in-place updates of 50 KWOK nodes, then invariants (BENCH_ARGS='--seed 42 --faults 100 --max-minutes 45 --nodes 50 --limit 5')"

# MANAGEMENT=embedded (the default) starts a management cluster with Cluster API's managers
# (the first run builds them); MANAGEMENT=none or MANAGEMENT_KUBECONFIG=… skip it.
MANAGEMENT ?= embedded
DEV_TOOLS := $(if $(or $(MANAGEMENT_KUBECONFIG),$(filter none,$(MANAGEMENT))),,--testbed --capi)
dev:
	@source scripts/env.sh $(DEV_TOOLS) && MANAGEMENT=$(MANAGEMENT) exec node --disable-warning=ExperimentalWarning src/local/dev.ts

demo:
	@source scripts/env.sh --testbed && exec node --disable-warning=ExperimentalWarning src/local/demo-cli.ts $(DEMO_ARGS)

# eval "$(make env)": this shell gets the tools make dev and the docs name (building what is missing;
# progress on stderr, only the export line on stdout).
env:
	@source scripts/env.sh --testbed --capi >&2 && \
	  printf 'export PATH=%q:"$$PATH"\n' "$(CURDIR)/bin:$$(dirname "$$(command -v node)"):$$(dirname "$$TEMPORAL_CLI"):$$(dirname "$$KUBECTL"):$$(dirname "$$CLUSTERCTL_BINARY")"

# The real-node tier runs last, on its own and one file at a time (as make test-nodes): beside other tiers
# on 2 cores, kubeadm's static pod waits run several times slower (docs/performance.md).
TEST_TIERS := unit workflow integration e2e capi production
test:
	@source scripts/env.sh --lint --testbed --capi --temporal-production --alerts --nodes && npm run --silent lint && npm run --silent typecheck && $(JEST) --ci --selectProjects $(TEST_TIERS) && $(JEST) --ci --runInBand --selectProjects nodes

# kubectl's built-in kustomize renders config/release (the test-bed tools provide kubectl).
release:
	@source scripts/env.sh --testbed && node scripts/release.ts --version "$(VERSION)" --image "$(IMAGE)" --out out

# The Dockerfile's build args; every file time is the commit's (reproducible: same commit and args, same digest).
BUILD_ID ?=
REVISION ?=
image:
	@source scripts/env.sh && SOURCE_DATE_EPOCH="$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct)}" node scripts/image.ts \
	  --version "$(VERSION)" --build-id "$(BUILD_ID)" --revision "$(REVISION)" --out out \
	  $(if $(IMAGE),--push "$(IMAGE)") $(if $(IMAGE_CA),--ca "$(IMAGE_CA)")

check-fresh:
	@bash scripts/check-fresh.sh

test-unit:
	@source scripts/env.sh --lint && $(JEST) --ci --selectProjects unit

test-e2e:
	@source scripts/env.sh && $(JEST) --ci --selectProjects e2e

test-workflow:
	@source scripts/env.sh && $(JEST) --ci --selectProjects workflow

lint:
	@source scripts/env.sh --lint && npm run --silent lint && npm run --silent typecheck

build:
	@source scripts/env.sh && npm run --silent build

bench:
	@source scripts/env.sh && node --disable-warning=ExperimentalWarning bench/hooks.ts

bench-fleet:
	@source scripts/env.sh $(if $(findstring production,$(BENCH_ARGS)),--temporal-production) $(if $(findstring testbed,$(BENCH_ARGS)),--testbed) && node --disable-warning=ExperimentalWarning bench/fleet.ts $(BENCH_ARGS)

bench-vs-go:
	@source scripts/env.sh && eval "$$(bash scripts/tools-capi.sh test-extension)" && node --disable-warning=ExperimentalWarning bench/upgrade-plan-vs-go.ts $(BENCH_ARGS)

bench-machine-updates:
	@source scripts/env.sh --testbed && node --disable-warning=ExperimentalWarning bench/machine-updates.ts $(BENCH_ARGS)

# Not a test: what a virtual machine as the real-node tier's node host costs (docs/performance.md).
bench-readiness:
	@source scripts/env.sh --testbed && node --disable-warning=ExperimentalWarning bench/readiness-cost.ts $(BENCH_ARGS)

bench-vm-node:
	@source scripts/env.sh --testbed --nodes && eval "$$(bash scripts/tools-nodes.sh --vm)" && node --disable-warning=ExperimentalWarning bench/vm-node.ts $(BENCH_ARGS)

chaos:
	@source scripts/env.sh --testbed && node --disable-warning=ExperimentalWarning bench/chaos.ts $(BENCH_ARGS)

clean:
	rm -rf dist coverage .data

test-integration:
	@source scripts/env.sh --testbed --alerts && $(JEST) --ci --selectProjects integration

test-production:
	@source scripts/env.sh --testbed --temporal-production && $(JEST) --ci --selectProjects production

# One file at a time: two clusters upgrading at once on 2 cores slow kubeadm's static pod waits tenfold.
test-nodes:
	@source scripts/env.sh --testbed --capi --nodes && $(JEST) --ci --runInBand --selectProjects nodes

# One scenario: make test-capi CAPI_TEST='abort between steps'
test-capi:
	@source scripts/env.sh --capi && $(JEST) --ci $(if $(CAPI_TEST),-t "$(CAPI_TEST)") --selectProjects capi
