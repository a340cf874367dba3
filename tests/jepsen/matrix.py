#!/usr/bin/python3
"""Runs jepsen.py for every nemesis x workload x map kind (quorum or not) and prints the
table of docs/reliability.md (markdown), one row per run, plus a JSON line per run on stderr.

Usage: matrix.py --grid-node PATH --grid-cli PATH [--time S] [--nemeses a,b] [--workloads a,b]
                 [--kinds quorum,plain] [--seed N] [--failure-timeout-ms MS] [--out FILE.json]
Exits 1 if any run found an anomaly where the map kind promises none (see PROMISES).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
NEMESES = ["kill-restart", "kill-late", "kill-replace", "pause", "partition", "bridge",
           "partition-master", "rolling", "mix"]
WORKLOADS = ["unique", "counter", "set", "register"]
# Faults that cut the cluster in two: a map without quorum keeps writing on both sides and the
# merge keeps one side's value per key (docs/reliability.md), so lost writes are expected.
SPLITS = {"partition", "bridge", "partition-master", "mix"}


def promised(nemesis, workload, quorum):
    """Whether Tessera promises this run no anomaly (docs/reliability.md, "What is promised")."""
    if workload == "register":
        return None  # reported, not promised: see the linearizability section
    return quorum or nemesis not in SPLITS


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--grid-node", required=True)
    p.add_argument("--grid-cli", required=True)
    p.add_argument("--time", type=float, default=60)
    p.add_argument("--nemeses", default=",".join(NEMESES))
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--kinds", default="plain,quorum")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--failure-timeout-ms", type=int, default=2000)
    p.add_argument("--out", help="all summaries as one JSON file")
    args = p.parse_args()
    rows, broken = [], []
    print("| nemesis | workload | map | operations | acknowledged | lost | unknown | verdict |")
    print("|---|---|---|---|---|---|---|---|")
    for nemesis in args.nemeses.split(","):
        for workload in args.workloads.split(","):
            for kind in args.kinds.split(","):
                quorum = kind == "quorum"
                with tempfile.TemporaryDirectory(prefix="tessera-matrix-") as work:
                    summary_path = os.path.join(work, "summary.json")
                    argv = [sys.executable, os.path.join(HERE, "jepsen.py"), "--grid-node",
                            args.grid_node, "--grid-cli", args.grid_cli, "--workload", workload,
                            "--nemesis", nemesis, "--time", str(args.time), "--seed",
                            str(args.seed), "--failure-timeout-ms",
                            str(args.failure_timeout_ms), "--json", summary_path]
                    if quorum:
                        argv.append("--quorum")
                    r = subprocess.run(argv, capture_output=True, text=True,
                                       timeout=args.time * 4 + 300)
                    try:
                        with open(summary_path) as f:
                            s = json.load(f)
                    except (OSError, ValueError):
                        s = {"operations": 0, "acknowledged": 0, "lost": 0, "unknown": 0,
                             "valid": "error: " + (r.stdout + r.stderr).strip()[-200:]}
                s.update({"nemesis": nemesis, "workload": workload, "map": kind})
                rows.append(s)
                print(json.dumps(s, default=list), file=sys.stderr)
                verdict = {True: "ok", False: "anomalies", "unknown": "undecided"}.get(
                    s["valid"], str(s["valid"]))
                if s["valid"] is False and s.get("anomalies"):
                    verdict += ": " + s["anomalies"][0][:90]
                expected = promised(nemesis, workload, quorum)
                if expected and s["valid"] is not True:
                    broken.append("%s/%s/%s" % (nemesis, workload, kind))
                print("| %s | %s | %s | %d | %d | %d | %d | %s |" % (
                    nemesis, workload, kind, s["operations"], s["acknowledged"], s["lost"],
                    s["unknown"], verdict), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1, default=list)
    if broken:
        print("\nbroken promises: " + ", ".join(broken))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
