# Entry points for operators and contributors.
#
#   make demo        run the local demo and exit (0 once everything is Ready)
#   make demo-keep   same, then keep it running for exploring until Ctrl-C
#   make demo-install the demo with the provider installed from its release:
#                    components applied, the manager pod run from its image
#   make test        build the test assets (once) and run every test, as CI does
#   make images      the manager image and the module images (noop and oci, each
#                    role) as OCI layouts in out/images
#   make release     out/: infrastructure-components.yaml, metadata.yaml, the
#                    cluster templates, tfcapi-lint, and the images (listed with
#                    their digests in out/images/IMAGES)

CARGO      ?= cargo
TARGET_DIR ?= $(or $(CARGO_TARGET_DIR),target)
DEMO_ARGS  ?=
OUT        ?= out
# The release: version (without the leading v: it names the clusterctl
# release folder v$(VERSION)) and where its images will be pushed.
VERSION    ?= 0.1.0
REGISTRY   ?= ghcr.io/captf-io
MANAGER_IMAGE ?= $(REGISTRY)/captf-manager:v$(VERSION)
# Module images are <MODULE_REGISTRY>/<cloud>-<role>:v$(VERSION)-<runtime>.
MODULE_REGISTRY ?= $(REGISTRY)
MODULE_IMAGES := noop-cluster noop-machine noop-machinepool oci-cluster oci-machine oci-machinepool
# The one lint warning the pool modules allow, each README says why.
POOL_LINT_ALLOW := pool/autoscaling-ignore-changes
# The CA bundle the OCI images' provider trusts: Debian's ca-certificates.
CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt
REVISION   ?= $(shell git rev-parse HEAD 2>/dev/null)
# Binaries in the images must need no libc of the image: glibc, linked in.
STATIC_TARGET := x86_64-unknown-linux-gnu
STATIC_DIR := $(TARGET_DIR)/$(STATIC_TARGET)/release

# hack/test-assets.sh builds (once) kube-apiserver, etcd, OpenTofu, Cluster
# API and kustomize, and prints where they are as shell assignments.
ASSETS := set -a && eval "$$(bash hack/test-assets.sh)" && set +a

.PHONY: demo demo-keep demo-install bench test images release

# The runner and the manager static: the manager image the real node runs
# has no libc.
demo:
	$(ASSETS) && \
	RUSTFLAGS="-C target-feature=+crt-static" $(CARGO) build --locked \
	  --target $(STATIC_TARGET) -p captf-manager --bin manager -p captf-runner --bin runner && \
	$(CARGO) build -p captf-demo --bins && \
	$(TARGET_DIR)/debug/captf-demo --bin-dir $(TARGET_DIR)/$(STATIC_TARGET)/debug $(DEMO_ARGS)

demo-keep: DEMO_ARGS += --keep
demo-keep: demo

# The release as make release builds it (debug profile), under a local
# reference the demo imports the layout into the real node's runtime as.
DEMO_RELEASE := $(OUT)/demo-release
DEMO_MANAGER_IMAGE := local.demo/captf-manager:v$(VERSION)
demo-install:
	$(ASSETS) && \
	RUSTFLAGS="-C target-feature=+crt-static" $(CARGO) build --locked \
	  --target $(STATIC_TARGET) -p captf-manager --bin manager -p captf-runner --bin runner && \
	$(CARGO) build --locked -p captf-images -p captf-runner -p captf-manager -p captf-demo --bins && \
	$(TARGET_DIR)/debug/captf-images manager \
	  --manager $(TARGET_DIR)/$(STATIC_TARGET)/debug/manager --runner $(TARGET_DIR)/$(STATIC_TARGET)/debug/runner \
	  --out $(DEMO_RELEASE)/images/captf-manager --reference $(DEMO_MANAGER_IMAGE) --version v$(VERSION) && \
	bash hack/release-manifests.sh $(DEMO_RELEASE) $(DEMO_MANAGER_IMAGE) && \
	$(TARGET_DIR)/debug/captf-demo --bin-dir $(TARGET_DIR)/$(STATIC_TARGET)/debug \
	  --install $(DEMO_RELEASE)/infrastructure-components.yaml \
	  --manager-image $(DEMO_RELEASE)/images/captf-manager $(DEMO_ARGS)

# The benchmark (docs/performance.md): release builds, the runner and the
# manager static for the image its Jobs run on the real node.
bench:
	$(ASSETS) && \
	RUSTFLAGS="-C target-feature=+crt-static" $(CARGO) build --release --locked \
	  --target $(STATIC_TARGET) -p captf-manager --bin manager -p captf-runner --bin runner && \
	$(CARGO) build --release --locked -p captf-bench && \
	$(TARGET_DIR)/release/captf-bench --bin-dir $(STATIC_DIR) $(BENCH_ARGS)

test:
	bash .ci/run

images:
	$(ASSETS) && \
	RUSTFLAGS="-C target-feature=+crt-static" $(CARGO) build --release --locked \
	  --target $(STATIC_TARGET) -p captf-manager --bin manager -p captf-runner --bin runner && \
	$(CARGO) build --release --locked -p captf-images -p captf-lint && \
	mkdir -p $(OUT)/images && \
	written=$$($(TARGET_DIR)/release/captf-images manager --manager $(STATIC_DIR)/manager --runner $(STATIC_DIR)/runner \
	  --out $(OUT)/images/captf-manager --reference $(MANAGER_IMAGE) --version v$(VERSION) --revision "$(REVISION)") && \
	echo "$$written" && echo "$$written" | awk '{print $$1 "@" $$2}' >$(OUT)/images/IMAGES && \
	{ test -f "$(CA_BUNDLE)" || { echo "error: no CA bundle at $(CA_BUNDLE) (Debian: apt-get install ca-certificates)" >&2; exit 1; }; } && \
	tofu_version="$$($$TOFU version -json | sed -n 's/.*"terraform_version": *"\([^"]*\)".*/\1/p')" && \
	for image in $(MODULE_IMAGES); do \
	  cloud=$${image%%-*}; role=$${image#*-}; \
	  $(TARGET_DIR)/release/tfcapi-lint schema modules/$$cloud/$$role --role $$role >$(OUT)/images/$$image.schema.json || exit 1; \
	  extras=""; \
	  if [ "$$cloud" = oci ]; then \
	    extras="--providers $$OCI_PROVIDER_MIRROR --provider-sums $$OCI_PROVIDER_SUMS --ca-bundle $(CA_BUNDLE)"; \
	  fi; \
	  written=$$($(TARGET_DIR)/release/captf-images module --role $$role --module modules/$$cloud/$$role --name $$image \
	    --runtime "$$TOFU" --runtime-version "$$tofu_version" $$extras \
	    --variables-schema $(OUT)/images/$$image.schema.json \
	    --out $(OUT)/images/$$image --reference $(MODULE_REGISTRY)/$$image:v$(VERSION)-opentofu \
	    --version v$(VERSION)-opentofu --revision "$(REVISION)") || exit 1; \
	  echo "$$written"; echo "$$written" | awk '{print $$1 "@" $$2}' >>$(OUT)/images/IMAGES; \
	  allow=""; \
	  if [ "$$role" = machinepool ]; then allow="--allow-warning $(POOL_LINT_ALLOW)"; fi; \
	  $(TARGET_DIR)/release/tfcapi-lint image oci:$(OUT)/images/$$image --role $$role --strict $$allow || exit 1; \
	done

release: images
	$(ASSETS) && \
	bash hack/release-manifests.sh "$(OUT)" "$(MANAGER_IMAGE)" && \
	$(CARGO) build --release --locked -p captf-lint --bin tfcapi-lint && \
	cp $(TARGET_DIR)/release/tfcapi-lint $(OUT)/tfcapi-lint
