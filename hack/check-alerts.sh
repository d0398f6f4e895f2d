#!/usr/bin/env bash
# Checks the provider's alerts (config/prometheus/alerts.yaml, a
# PrometheusRule) with promtool: the rule groups are valid and the unit
# tests of config/prometheus/tests/rules_test.yaml pass. promtool comes from
# $PROMTOOL, else PATH (Debian's `prometheus` package ships it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
promtool=${PROMTOOL:-$(command -v promtool || true)}
[ -n "$promtool" ] && [ -x "$promtool" ] || { echo "check-alerts: promtool not found: install Debian's prometheus package or set PROMTOOL" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# promtool reads plain rule files: the PrometheusRule's spec is one.
python3 - config/prometheus/alerts.yaml "$work/captf.rules.yaml" <<'PY'
import sys, yaml
rule = yaml.safe_load(open(sys.argv[1]))
assert rule["kind"] == "PrometheusRule" and rule["metadata"]["name"] == "captf-alerts", "not the captf-alerts PrometheusRule"
groups = rule["spec"]["groups"]
assert [g["name"] for g in groups] == ["captf"], "one group named captf"
yaml.safe_dump({"groups": groups}, open(sys.argv[2], "w"), sort_keys=False)
PY
cp config/prometheus/tests/rules_test.yaml "$work/"
"$promtool" check rules "$work/captf.rules.yaml"
# Every alert has a test that expects it to fire.
for alert in $(python3 -c 'import sys,yaml; [print(r["alert"]) for r in yaml.safe_load(open(sys.argv[1]))["groups"][0]["rules"]]' "$work/captf.rules.yaml"); do
  grep -q "alertname: $alert\$" "$work/rules_test.yaml" || { echo "check-alerts: no test of $alert" >&2; exit 1; }
done
(cd "$work" && "$promtool" test rules rules_test.yaml)
