#!/usr/bin/env bash
# Fails when a test run left the real node's changes on the host: iptables
# chains of the kubelet, kube-proxy or the CNI plugins, the CNI bridge,
# a further node's network namespace or veth, mounts or folders of a node,
# the nodes' cgroups, or sysctls not put back (their saved values still
# waiting in the nodes' host file).
set -euo pipefail

left=()
for save in iptables-save ip6tables-save; do
  if command -v "$save" >/dev/null && "$save" 2>/dev/null | grep -qE '^:(KUBE|CNI)-|-j (KUBE|CNI)-'; then
    left+=("$save lists KUBE-/CNI- chains")
  fi
done
ip link show captf0 >/dev/null 2>&1 && left+=("the CNI bridge captf0")
ip -br link | grep -q '^captf-h[0-9]' && left+=("a node's veth ($(ip -br link | grep -o '^captf-h[0-9]*' | tr '\n' ' '))")
ip netns list | grep -q '^captf-node' && left+=("a node's network namespace ($(ip netns list | grep -o '^captf-node[0-9]*' | tr '\n' ' '))")
tmp=${TMPDIR:-/tmp}
grep -qE " $tmp/captf-node[0-9]*-" /proc/self/mountinfo && left+=("mounts under $tmp/captf-node*-*")
compgen -G "$tmp/captf-node*-*/" >/dev/null && left+=("node folders $tmp/captf-node*-*/")
[ -e "$tmp/captf-node-host" ] && left+=("sysctls not put back ($tmp/captf-node-host: $(tr '\n' ' ' <"$tmp/captf-node-host"))")
compgen -G "/var/run/netns/cni-*" >/dev/null && left+=("pod network namespaces /var/run/netns/cni-*")
compgen -G "/sys/fs/cgroup/*/captf-node*" >/dev/null && left+=("the nodes' cgroups /sys/fs/cgroup/*/captf-node*")

if [ "${#left[@]}" -gt 0 ]; then
  printf 'error: the host was left with: %s\n' "${left[@]}" >&2
  exit 1
fi
echo "the host is as the run found it"
