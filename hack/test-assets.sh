#!/usr/bin/env bash
# Builds the test assets from the Go module proxy into a cache keyed by version:
#   kube-apiserver, kube-controller-manager, etcd  -> $CACHE/kubernetes-v<k8s>/
#   kubelet, kube-proxy, kube-scheduler (the node)  -> $CACHE/kubernetes-node-v<k8s>/
#   tofu (OpenTofu)                                -> $CACHE/opentofu-v<tofu>/
#   Cluster API managers, clusterctl, CRDs, webhooks -> $CACHE/cluster-api-v<capi>/
#   kustomize                                      -> $CACHE/kustomize-v<kustomize>/
#   cert-manager's Certificate and Issuer CRDs     -> $CACHE/cert-manager-v<cm>/crd/
#   mdbook (from crates.io)                        -> $CACHE/mdbook-v<mdbook>/bin/
#   the oracle/oci provider, a filesystem mirror   -> $CACHE/oci-provider-v<oci>/mirror/ (and its SHA256SUMS)
#     (not built: unpacked with zstd from the build in ../shared/providers/oci,
#     or OCI_PROVIDER_DIST, with both sha256 sums of its SHA256SUMS checked)
# Does nothing for an asset that is already there. Honours KUBEBUILDER_ASSETS
# (a folder with kube-apiserver and etcd, the envtest convention, plus the
# kube-controller-manager the test clusters run), NODE_ASSETS (a folder with
# kubelet, kube-proxy and kube-scheduler) and TOFU (a tofu binary) when a
# user has binaries; those are checked, never built.
# Prints the resolved locations as shell assignments on stdout.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/versions.env
. "$here/versions.env"

cache=${CAPTF_ASSETS_CACHE:-$HOME/.cache/captf-test-assets}
k8s_dir=$cache/kubernetes-v$KUBERNETES_VERSION
node_dir=$cache/kubernetes-node-v$KUBERNETES_VERSION
tofu_dir=$cache/opentofu-v$OPENTOFU_VERSION
capi_dir=$cache/cluster-api-v$CLUSTER_API_VERSION
kustomize_dir=$cache/kustomize-v$KUSTOMIZE_VERSION
cert_manager_dir=$cache/cert-manager-v$CERT_MANAGER_VERSION
mdbook_dir=$cache/mdbook-v$MDBOOK_VERSION
# The OCI provider the module tests validate against, and the build the
# module images ship (the OCI modules accept >= 8.28.0, < 10.0.0). Installed
# from a build outside the repository, which the Go module proxy cannot serve.
OCI_PROVIDER_VERSION=8.28.0
# Its default is the workplace's shared folder beside this checkout; a clone
# made elsewhere on the same machine finds it at /work/shared.
oci_dist=${OCI_PROVIDER_DIST:-$(dirname "$(cd "$here/.." && pwd)")/shared/providers/oci}
if [ -z "${OCI_PROVIDER_DIST:-}" ] && [ ! -d "$oci_dist" ] && [ -d /work/shared/providers/oci ]; then
  oci_dist=/work/shared/providers/oci
fi
oci_dir=$cache/oci-provider-v$OCI_PROVIDER_VERSION

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-buildvcs=false
log() { printf '[test-assets] %s\n' "$*" >&2; }
die() { printf '[test-assets] error: %s\n' "$*" >&2; exit 1; }
command -v go >/dev/null || die "go is not on PATH; the assets are built with the Go toolchain"

# new_wrapper DIR: an empty Go module used to build someone else's main packages
# with our own replace directives (replace in a dependency's go.mod is ignored).
new_wrapper() {
  mkdir -p "$1"
  printf 'module captf.local/testassets\n\ngo 1.26\n' >"$1/go.mod"
}

# k8s_wrapper DIR: a wrapper module in DIR requiring k8s.io/kubernetes at the
# pinned version (and etcd's server), with every staging module replaced by
# the version the proxy serves; the kube binaries build from it.
k8s_wrapper() {
  local v=$KUBERNETES_VERSION
  new_wrapper "$1"
  (
    cd "$1"
    # The staging modules are required at v0.0.0 and replaced by paths inside
    # the kubernetes repository; the proxy serves each as v0.<minor>.<patch>.
    go mod download -json "k8s.io/kubernetes@v$v" >/dev/null
    local kmod; kmod=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$v.mod
    local staging
    staging=$(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$kmod")
    [ -n "$staging" ] || die "no staging replaces found in k8s.io/kubernetes@v$v go.mod"
    local m edits=(-require="k8s.io/kubernetes@v$v" -require="go.etcd.io/etcd/server/v3@v$ETCD_VERSION")
    for m in $staging; do
      case $m in k8s.io/sample-cli-plugin|k8s.io/sample-controller) continue ;; esac
      edits+=(-replace="$m=$m@v0.${v#1.}")
    done
    go mod edit "${edits[@]}"
  )
}

# k8s_build DIR OUT CMD...: builds k8s.io/kubernetes/cmd/CMD... into OUT with
# the version stamped as a release build stamps it.
k8s_build() {
  local dir=$1 out=$2; shift 2
  local v=$KUBERNETES_VERSION minor c pkgs=()
  minor=$(cut -d. -f2 <<<"$v")
  for c in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  (
    cd "$dir"
    local gets=() p
    for p in "${pkgs[@]}"; do gets+=("$p@v$v"); done
    go get "${gets[@]}" >&2
    local pkg=k8s.io/component-base/version
    local date; date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    local ld="-s -w -X $pkg.gitVersion=v$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor \
      -X $pkg.gitTreeState=clean -X $pkg.gitCommit=v$v -X $pkg.buildDate=$date"
    mkdir -p "$out"
    go build -trimpath -ldflags "$ld" -o "$out/" "${pkgs[@]}"
  )
}

build_kubernetes() {
  local v=$KUBERNETES_VERSION
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  log "building Kubernetes v$v (kube-apiserver, kube-controller-manager) and etcd v$ETCD_VERSION"
  k8s_wrapper "$work"
  (cd "$work" && go get "k8s.io/kubernetes/cmd/kube-apiserver@v$v" "k8s.io/kubernetes/cmd/kube-controller-manager@v$v" \
    "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >&2)
  k8s_build "$work" "$work/out" kube-apiserver kube-controller-manager
  (
    cd "$work"
    go build -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v$ETCD_VERSION" -o out/etcd go.etcd.io/etcd/server/v3
  )
  local v_out; v_out=$("$work/out/kube-apiserver" --version)
  [ "$v_out" = "Kubernetes v$v" ] || die "kube-apiserver reports '$v_out', expected 'Kubernetes v$v'"
  mkdir -p "$cache"
  rm -rf "$k8s_dir.tmp" && mv "$work/out" "$k8s_dir.tmp" && mv "$k8s_dir.tmp" "$k8s_dir"
}

# The real node's Kubernetes parts, from the same module version: the
# kubelet, kube-proxy and the scheduler that binds pods to the node.
NODE_BINARIES="kubelet kube-proxy kube-scheduler"
build_kubernetes_node() {
  local v=$KUBERNETES_VERSION b
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  log "building Kubernetes v$v node parts ($NODE_BINARIES)"
  k8s_wrapper "$work"
  # shellcheck disable=SC2086
  k8s_build "$work" "$work/out" $NODE_BINARIES
  for b in kubelet kube-scheduler; do
    local v_out; v_out=$("$work/out/$b" --version)
    [ "$v_out" = "Kubernetes v$v" ] || die "$b reports '$v_out', expected 'Kubernetes v$v'"
  done
  mkdir -p "$cache"
  rm -rf "$node_dir.tmp" && mv "$work/out" "$node_dir.tmp" && mv "$node_dir.tmp" "$node_dir"
}

build_tofu() {
  local v=$OPENTOFU_VERSION
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  log "building OpenTofu v$v"
  new_wrapper "$work"
  (
    cd "$work"
    go mod download -json "github.com/opentofu/opentofu@v$v" >/dev/null
    local tmod; tmod=$(go env GOMODCACHE)/cache/download/github.com/opentofu/opentofu/@v/v$v.mod
    # OpenTofu replaces hashicorp/hcl with its fork; repeat every replace here.
    local edits=(-require="github.com/opentofu/opentofu@v$v") line
    while read -r line; do edits+=(-replace="$line"); done < <(
      awk '/^replace [^(]/ {sub(/^replace /,""); print} /^replace \(/ {inb=1; next} inb && /^\)/ {inb=0} inb {print}' "$tmod" |
        awk '{ if ($2 == "=>") printf "%s=%s@%s\n", $1, $3, $4; else printf "%s@%s=%s@%s\n", $1, $2, $4, $5 }')
    go mod edit "${edits[@]}"
    go get "github.com/opentofu/opentofu/cmd/tofu@v$v" >&2
    mkdir -p out
    go build -trimpath -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" -o out/tofu github.com/opentofu/opentofu/cmd/tofu
  )
  # Read the whole output: `head` would close the pipe early, and under
  # pipefail a SIGPIPE'd tofu fails a correct build.
  local reported; reported=$("$work/out/tofu" version 2>/dev/null | sed -n 1p)
  [ "$reported" = "OpenTofu v$v" ] || die "tofu reports '$reported'"
  mkdir -p "$cache"
  rm -rf "$tofu_dir.tmp" && mv "$work/out" "$tofu_dir.tmp" && mv "$tofu_dir.tmp" "$tofu_dir"
}

# The Cluster API parts tests run as processes, all from the one module version:
#   bin/     the core manager, the kubeadm bootstrap and control plane managers, clusterctl
#   crd/     every CRD they serve (core, kubeadm bootstrap, kubeadm control plane),
#            and clusterctl's provider inventory CRD, which `clusterctl init` installs
#   webhook/ each manager's webhook configurations (core.yaml, bootstrap.yaml, controlplane.yaml)
CAPI_BINARIES="cluster-api-manager kubeadm-bootstrap-manager kubeadm-control-plane-manager clusterctl"
capi_complete() {
  local b
  for b in $CAPI_BINARIES; do [ -x "$capi_dir/bin/$b" ] || return 1; done
  for b in core bootstrap controlplane; do [ -s "$capi_dir/webhook/$b.yaml" ] || return 1; done
  grep -q 'cluster.x-k8s.io/v1beta2: v1beta2' "$capi_dir/crd/bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml" 2>/dev/null
}

INVENTORY_CRD=clusterctl.cluster.x-k8s.io_providers.yaml
# module_dir VERSION: the cluster-api module's folder in the Go module cache.
capi_module_dir() {
  local work; work=$(mktemp -d)
  new_wrapper "$work"
  (cd "$work" && go mod download -json "sigs.k8s.io/cluster-api@v$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  rm -rf "$work"
}

# copy_inventory_crd MODULE_DIR OUT: clusterctl's Provider CRD, which
# `clusterctl move` reads in both management clusters.
copy_inventory_crd() {
  local src="$1/cmd/clusterctl/config/manifest/clusterctl-api.yaml"
  [ -s "$src" ] || die "sigs.k8s.io/cluster-api has no cmd/clusterctl/config/manifest/clusterctl-api.yaml"
  cp "$src" "$2/$INVENTORY_CRD"
  chmod u+w "$2/$INVENTORY_CRD"
}

build_capi() {
  local v=$CLUSTER_API_VERSION
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  log "building Cluster API v$v (core, kubeadm bootstrap and control plane managers, clusterctl)"
  new_wrapper "$work"
  local dir
  (
    cd "$work"
    # The api packages are their own module, which cluster-api's go.mod
    # replaces by a path that is not in its module zip: replace it here.
    go mod edit -require="sigs.k8s.io/cluster-api@v$v" -require="sigs.k8s.io/cluster-api/api@v$v" \
      -replace="sigs.k8s.io/cluster-api/api=sigs.k8s.io/cluster-api/api@v$v"
    go get "sigs.k8s.io/cluster-api/core@v$v" "sigs.k8s.io/cluster-api/bootstrap/kubeadm@v$v" \
      "sigs.k8s.io/cluster-api/controlplane/kubeadm@v$v" "sigs.k8s.io/cluster-api/cmd/clusterctl@v$v" >&2
    local pkg=sigs.k8s.io/cluster-api/version minor
    minor=$(cut -d. -f2 <<<"$v")
    local ld="-s -w -X $pkg.gitVersion=v$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor \
      -X $pkg.gitTreeState=clean -X $pkg.gitCommit=v$v -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    mkdir -p out/bin
    go build -trimpath -ldflags "$ld" -o out/bin/cluster-api-manager sigs.k8s.io/cluster-api/core
    go build -trimpath -ldflags "$ld" -o out/bin/kubeadm-bootstrap-manager sigs.k8s.io/cluster-api/bootstrap/kubeadm
    go build -trimpath -ldflags "$ld" -o out/bin/kubeadm-control-plane-manager sigs.k8s.io/cluster-api/controlplane/kubeadm
    go build -trimpath -ldflags "$ld" -o out/bin/clusterctl sigs.k8s.io/cluster-api/cmd/clusterctl
  )
  dir=$(cd "$work" && go mod download -json "sigs.k8s.io/cluster-api@v$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir/core/config/crd/bases" ] || die "sigs.k8s.io/cluster-api@v$v has no core/config/crd/bases"
  mkdir -p "$work/out/crd" "$work/out/webhook"
  cp "$dir"/core/config/crd/bases/*.yaml "$work/out/crd/"
  copy_inventory_crd "$dir" "$work/out/crd"
  # The kubeadm providers' kustomizations label their CRDs with the contract
  # versions they implement (the topology controller reads the labels).
  local f
  for f in "$dir"/bootstrap/kubeadm/config/crd/bases/*.yaml "$dir"/controlplane/kubeadm/config/crd/bases/*.yaml; do
    awk '!done && /^metadata:$/ {print; print "  labels:"; print "    cluster.x-k8s.io/v1beta1: v1beta1";
      print "    cluster.x-k8s.io/v1beta2: v1beta2"; done=1; next} {print}' "$f" >"$work/out/crd/$(basename "$f")"
  done
  cp "$dir/core/config/webhook/manifests.yaml" "$work/out/webhook/core.yaml"
  cp "$dir/bootstrap/kubeadm/config/webhook/manifests.yaml" "$work/out/webhook/bootstrap.yaml"
  cp "$dir/controlplane/kubeadm/config/webhook/manifests.yaml" "$work/out/webhook/controlplane.yaml"
  cp "$dir/metadata.yaml" "$work/out/metadata.yaml"
  chmod -R u+w "$work/out"
  local got; got=$("$work/out/bin/clusterctl" version -o short 2>/dev/null || true)
  [ "$got" = "v$v" ] || die "clusterctl reports '$got', expected 'v$v'"
  mkdir -p "$cache"
  rm -rf "$capi_dir.tmp" && mv "$work/out" "$capi_dir.tmp" && rm -rf "$capi_dir" && mv "$capi_dir.tmp" "$capi_dir"
}

build_kustomize() {
  local v=$KUSTOMIZE_VERSION
  local work; work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  log "building kustomize v$v"
  new_wrapper "$work"
  (
    cd "$work"
    go get "sigs.k8s.io/kustomize/kustomize/v5@v$v" >&2
    mkdir -p out
    go build -trimpath -ldflags "-s -w" -o out/kustomize sigs.k8s.io/kustomize/kustomize/v5
  )
  "$work/out/kustomize" version >/dev/null || die "the kustomize build does not run"
  mkdir -p "$cache"
  rm -rf "$kustomize_dir.tmp" && mv "$work/out" "$kustomize_dir.tmp" && mv "$kustomize_dir.tmp" "$kustomize_dir"
}

# The CRDs of the cert-manager objects the provider components hold, so the
# test control plane accepts the components as a cluster with cert-manager
# would. From the Go module (its deploy/crds), not a download site.
fetch_cert_manager_crds() {
  local v=$CERT_MANAGER_VERSION dir
  log "fetching cert-manager v$v CRDs"
  dir=$(cd "$(mktemp -d)" && go mod download -json "github.com/cert-manager/cert-manager@v$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] && [ -d "$dir/deploy/crds" ] || die "the cert-manager v$v module has no deploy/crds"
  rm -rf "$cert_manager_dir.tmp" && mkdir -p "$cert_manager_dir.tmp/crd"
  for crd in cert-manager.io_certificates.yaml cert-manager.io_issuers.yaml; do
    [ -s "$dir/deploy/crds/$crd" ] || die "cert-manager v$v lacks deploy/crds/$crd"
    cp "$dir/deploy/crds/$crd" "$cert_manager_dir.tmp/crd/"
  done
  chmod -R u+w "$cert_manager_dir.tmp"
  rm -rf "$cert_manager_dir" && mv "$cert_manager_dir.tmp" "$cert_manager_dir"
}

build_mdbook() {
  local v=$MDBOOK_VERSION
  command -v cargo >/dev/null || die "cargo is not on PATH; mdbook is built from crates.io"
  log "building mdbook v$v"
  rm -rf "$mdbook_dir.tmp"
  cargo install --quiet --locked --version "=$v" --root "$mdbook_dir.tmp" mdbook >&2 || die "cargo install mdbook $v failed"
  "$mdbook_dir.tmp/bin/mdbook" --version >/dev/null || die "the mdbook build does not run"
  rm -rf "$mdbook_dir" && mv "$mdbook_dir.tmp" "$mdbook_dir"
}

# The oracle/oci provider in the unpacked filesystem-mirror layout OpenTofu
# reads: <mirror>/registry.opentofu.org/oracle/oci/<v>/linux_amd64/<binary>.
oci_binary=terraform-provider-oci_v$OCI_PROVIDER_VERSION
oci_zst=${oci_binary}_linux_amd64.zst
oci_rel=mirror/registry.opentofu.org/oracle/oci/$OCI_PROVIDER_VERSION/linux_amd64/$oci_binary

# The sum SHA256SUMS lists for FILE, or nothing.
oci_listed_sum() { awk -v f="$1" '$2 == f || $2 == "*" f {print $1}' "$oci_dist/SHA256SUMS"; }

# What an install came from: the sums file and the compressed file's size and
# mtime. A cached install is reused only while these are unchanged, so an
# edited or replaced build is checked again, without hashing 290 MB each run.
oci_source_stamp() {
  cat "$oci_dist/SHA256SUMS"
  stat -c 'zst %s %Y' "$oci_dist/$oci_zst"
}

install_oci_provider() {
  local v=$OCI_PROVIDER_VERSION tmp=$oci_dir.tmp want got
  command -v zstd >/dev/null || die "zstd is not on PATH; it unpacks the OCI provider (Debian: apt-get install -y zstd)"
  log "installing the oracle/oci provider v$v from $oci_dist"
  want=$(oci_listed_sum "$oci_zst")
  [ -n "$want" ] || die "$oci_dist/SHA256SUMS lists no sum for $oci_zst"
  got=$(sha256sum "$oci_dist/$oci_zst" | cut -d' ' -f1)
  [ "$got" = "$want" ] || die "$oci_dist/$oci_zst has sha256 $got, SHA256SUMS says $want"
  rm -rf "$tmp" && mkdir -p "$(dirname "$tmp/$oci_rel")"
  zstd -q -d -f "$oci_dist/$oci_zst" -o "$tmp/$oci_rel" || die "zstd cannot unpack $oci_dist/$oci_zst"
  want=$(oci_listed_sum "$oci_binary")
  [ -n "$want" ] || die "$oci_dist/SHA256SUMS lists no sum for $oci_binary"
  got=$(sha256sum "$tmp/$oci_rel" | cut -d' ' -f1)
  [ "$got" = "$want" ] || { rm -rf "$tmp"; die "the unpacked $oci_binary has sha256 $got, SHA256SUMS says $want"; }
  chmod 0755 "$tmp/$oci_rel"
  # The module images check the mirror against these sums when they are built.
  cp "$oci_dist/SHA256SUMS" "$tmp/SHA256SUMS"
  oci_source_stamp >"$tmp/installed-from"
  mkdir -p "$cache"
  rm -rf "$oci_dir" && mv "$tmp" "$oci_dir"
}

# The builds are independent: they run side by side (go build keeps both
# cores busy while another build downloads modules or links), each in a
# subshell of its own, and the script fails if any of them failed.
pids=()
# A folder of binaries: the user's when the variable named $1 is set
# (checked, never built), else the cache folder $2, built by the function $3
# in the background when one of the binaries named after it is missing.
# Sets `resolved`.
asset_folder() {
  local var=$1 dir=$2 build=$3
  shift 3
  local given=${!var:-}
  if [ -n "$given" ]; then
    for b in "$@"; do
      [ -x "$given/$b" ] || die "$var=$given has no executable $b"
    done
    resolved=$given
    return
  fi
  resolved=$dir
  for b in "$@"; do
    [ -x "$dir/$b" ] || { "$build" & pids+=($!); break; }
  done
}

asset_folder KUBEBUILDER_ASSETS "$k8s_dir" build_kubernetes kube-apiserver etcd kube-controller-manager
kube_assets=$resolved
# shellcheck disable=SC2086 # the list of node binaries, one word each
asset_folder NODE_ASSETS "$node_dir" build_kubernetes_node $NODE_BINARIES
node_assets=$resolved

if [ -n "${TOFU:-}" ]; then
  [ -x "$TOFU" ] || die "TOFU=$TOFU is not an executable"
  tofu=$TOFU
else
  tofu=$tofu_dir/tofu
  [ -x "$tofu" ] || { build_tofu & pids+=($!); }
fi

capi_complete || { build_capi & pids+=($!); }
[ -x "$kustomize_dir/kustomize" ] || { build_kustomize & pids+=($!); }
[ -s "$cert_manager_dir/crd/cert-manager.io_certificates.yaml" ] || { fetch_cert_manager_crds & pids+=($!); }
[ -x "$mdbook_dir/bin/mdbook" ] || { build_mdbook & pids+=($!); }
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
[ "$failed" = 0 ] || die "a build failed (its error is above)"
# Caches built before the inventory CRD was an asset gain it without a rebuild.
if [ ! -s "$capi_dir/crd/$INVENTORY_CRD" ]; then
  log "adding clusterctl's inventory CRD to the Cluster API assets"
  copy_inventory_crd "$(capi_module_dir "$CLUSTER_API_VERSION")" "$capi_dir/crd"
fi

[ "$(uname -m)" = x86_64 ] || die "the OCI provider build is for linux/amd64 only; this machine is $(uname -m)"
for f in SHA256SUMS "$oci_zst"; do
  [ -s "$oci_dist/$f" ] || die "the OCI provider build lacks $oci_dist/$f"
done
if [ ! -x "$oci_dir/$oci_rel" ] || [ ! -f "$oci_dir/SHA256SUMS" ] || [ "$(oci_source_stamp)" != "$(cat "$oci_dir/installed-from" 2>/dev/null)" ]; then
  install_oci_provider
fi

printf 'KUBEBUILDER_ASSETS=%q\nNODE_ASSETS=%q\nTOFU=%q\nCAPI_CRDS=%q\nCAPI_ASSETS=%q\nKUSTOMIZE=%q\nCERT_MANAGER_CRDS=%q\nMDBOOK=%q\nOCI_PROVIDER_MIRROR=%q\nOCI_PROVIDER_SUMS=%q\n' "$kube_assets" "$node_assets" "$tofu" "$capi_dir/crd" "$capi_dir" "$kustomize_dir/kustomize" "$cert_manager_dir/crd" "$mdbook_dir/bin/mdbook" "$oci_dir/mirror" "$oci_dir/SHA256SUMS"
