# The local demo: a control plane, a node agent and the manager on this
# machine, converging an example cluster and machine pool (crates/demo).
#
#   make demo        run it and exit (0 once everything is Ready)
#   make demo-keep   same, then keep it running for exploring until Ctrl-C

CARGO      ?= cargo
TARGET_DIR ?= $(or $(CARGO_TARGET_DIR),target)
DEMO_ARGS  ?=

.PHONY: demo demo-keep

# hack/test-assets.sh builds (once) kube-apiserver, etcd, OpenTofu and the
# Cluster API CRDs, and prints where they are as shell assignments.
demo:
	set -a && eval "$$(bash hack/test-assets.sh)" && set +a && \
	$(CARGO) build -p captf-runner -p captf-manager -p captf-demo --bins && \
	$(TARGET_DIR)/debug/captf-demo $(DEMO_ARGS)

demo-keep: DEMO_ARGS += --keep
demo-keep: demo
