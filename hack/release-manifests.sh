#!/usr/bin/env bash
# Writes the clusterctl files of a release into OUT: the provider components
# (config/default with the manager image set to IMAGE), metadata.yaml and
# the cluster templates.
#   hack/release-manifests.sh OUT IMAGE      (KUSTOMIZE names kustomize)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:?usage: release-manifests.sh OUT IMAGE}
image=${2:?usage: release-manifests.sh OUT IMAGE}
kustomize=${KUSTOMIZE:-kustomize}
# A release pins its image: a tag other than latest, or a digest.
last=${image##*/}
case "$last" in
  *@sha256:*) ;;
  *:latest) echo "error: image $image is :latest; a release pins a version" >&2; exit 1 ;;
  *:*) ;;
  *) echo "error: image $image has no tag" >&2; exit 1 ;;
esac

mkdir -p "$out"
overlay=$(mktemp -d)
trap 'rm -rf "$overlay"' EXIT
# An overlay over config/default: the release image in the manager
# container (the manager takes the Jobs' runner image from it at start).
cat >"$overlay/kustomization.yaml" <<YAML
resources:
- $(realpath --relative-to="$overlay" config/default)
patches:
- target:
    kind: Deployment
    name: captf-controller-manager
  patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/image
      value: $image
YAML
"$kustomize" build "$overlay" >"$out/infrastructure-components.yaml"
cp metadata.yaml "$out/metadata.yaml"
cp templates/*.yaml "$out/"
echo "wrote $out/infrastructure-components.yaml, $out/metadata.yaml and the templates of templates/"
