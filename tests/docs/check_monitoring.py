#!/usr/bin/env python3
"""Checks the monitoring files shipped in docs/ with promtool (Debian package prometheus):
docs/prometheus.yml is a valid Prometheus configuration, and every query of
docs/grafana-dashboard.json is valid PromQL (each becomes a recording rule that
`promtool check rules` parses) over metric names the members export (each tessera_* name in a
query must appear in the sources that register metrics). Exit 0 when all hold.

Usage: tests/docs/check_monitoring.py ROOT"""
import json
import os
import re
import subprocess
import sys
import tempfile


def main():
    root = sys.argv[1]
    failures = []
    r = subprocess.run(["promtool", "check", "config", os.path.join(root, "docs", "prometheus.yml")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"docs/prometheus.yml: {r.stdout}{r.stderr}")
    dash = json.load(open(os.path.join(root, "docs", "grafana-dashboard.json")))
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        json.dump(rules, f)  # JSON is YAML
    r = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
    os.unlink(f.name)
    if r.returncode != 0:
        failures.append(f"docs/grafana-dashboard.json queries: {r.stdout}{r.stderr}")
    sources = ""
    for folder in ("grid", "saga", "map", "core"):
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in files:
                if name.endswith(".cc"):
                    sources += open(os.path.join(dirpath, name)).read()
    for expr in exprs:
        for metric in re.findall(r"tessera_[a-z0-9_]+", expr):
            if f'"{metric}"' not in sources:
                failures.append(f"the dashboard queries {metric}, which no member exports")
    for f in failures:
        print("FAIL", f)
    print(f"{len(exprs)} dashboard queries checked; {len(failures)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
