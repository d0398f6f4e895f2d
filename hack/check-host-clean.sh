#!/usr/bin/env bash
# Fails when a test run left the real node's changes on the host: iptables
# chains of the kubelet, kube-proxy or the CNI plugins, the CNI bridge,
# mounts or folders of a node, the kubelet's host folders, or sysctls not
# put back (their saved values still waiting in the node's host file).
set -euo pipefail

left=()
for save in iptables-save ip6tables-save; do
  if command -v "$save" >/dev/null && "$save" 2>/dev/null | grep -qE '^:(KUBE|CNI)-|-j (KUBE|CNI)-'; then
    left+=("$save lists KUBE-/CNI- chains")
  fi
done
ip link show captf0 >/dev/null 2>&1 && left+=("the CNI bridge captf0")
tmp=${TMPDIR:-/tmp}
grep -q " $tmp/captf-node-" /proc/self/mountinfo && left+=("mounts under $tmp/captf-node-*")
compgen -G "$tmp/captf-node-*/" >/dev/null && left+=("node folders $tmp/captf-node-*/")
[ -e "$tmp/captf-node-host" ] && left+=("sysctls not put back ($tmp/captf-node-host: $(tr '\n' ' ' <"$tmp/captf-node-host"))")
compgen -G "/var/run/netns/cni-*" >/dev/null && left+=("pod network namespaces /var/run/netns/cni-*")
compgen -G "/sys/fs/cgroup/*/captf-node" >/dev/null && left+=("the node's cgroups /sys/fs/cgroup/*/captf-node")

if [ "${#left[@]}" -gt 0 ]; then
  printf 'error: the host was left with: %s\n' "${left[@]}" >&2
  exit 1
fi
echo "the host is as the run found it"
