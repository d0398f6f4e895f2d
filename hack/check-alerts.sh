#!/usr/bin/env bash
# Checks the provider's alerts (config/prometheus/alerts.yaml, a
# PrometheusRule) with promtool: the rule groups are valid and the unit
# tests of config/prometheus/tests/rules_test.yaml pass; and the Grafana
# dashboard (config/prometheus/dashboard.json): it parses, every panel has a
# query and the queries are valid PromQL. promtool comes from $PROMTOOL, else
# PATH (Debian's `prometheus` package ships it).
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

# The Grafana dashboard (config/prometheus/dashboard.json): valid JSON in the
# committed formatting (2-space indent, trailing newline), and every panel
# queries something. Its PromQL goes through promtool as recording rules,
# with the dashboard's variables replaced by values that match anything.
python3 - config/prometheus/dashboard.json "$work/dashboard.rules.yaml" <<'PY'
import json, re, sys, yaml
path = sys.argv[1]
def fail(msg):
    sys.exit(f"check-alerts: {path}: {msg}")
text = open(path, encoding="utf-8").read()
try:
    dash = json.loads(text)
except json.JSONDecodeError as e:
    fail(f"not valid JSON: {e}")
if text != json.dumps(dash, indent=2) + "\n":
    fail("not formatted with a 2-space indent and a trailing newline: python3 -m json.tool --indent 2")
if dash.get("uid") != "captf-overview" or dash.get("title") != "CAPTF":
    fail("uid must be captf-overview and title CAPTF")
panels = []
for p in dash.get("panels", []):
    panels.append(p)
    panels.extend(p.get("panels", []))  # a collapsed row holds its panels
rules, ids, problems = [], set(), []
for p in panels:
    where = f"panel {p.get('id')} {p.get('title')!r}"
    if p.get("id") in ids:
        problems.append(f"{where}: duplicate id")
    ids.add(p.get("id"))
    if p.get("type") == "row":
        continue
    if not str(p.get("description", "")).strip():
        problems.append(f"{where}: no description")
    exprs = [t for t in p.get("targets", []) if str(t.get("expr", "")).strip()]
    if not exprs:
        problems.append(f"{where}: no target with a non-empty expr")
    for t in exprs:
        expr = re.sub(r"\$\{?(\w+)\}?", lambda m: "5m" if m.group(1).startswith("__") else ".*", t["expr"])
        rules.append({"record": f"dashboard:panel_{p['id']}:{t.get('refId', 'A')}", "expr": expr})
if problems:
    fail("\n  " + "\n  ".join(problems))
if not rules:
    fail("no panels")
yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(sys.argv[2], "w"), sort_keys=False)
print(f"check-alerts: {path}: {len(panels)} panels, {len(rules)} queries")
PY
"$promtool" check rules "$work/dashboard.rules.yaml"
