#!/usr/bin/python3
"""A Jepsen-style run against real grid-node processes (docs/reliability.md).

Starts a cluster of grid-nodes on 127.0.0.1, runs a workload through their RESP ports with
Redis clients (redis-py, Debian's python3-redis) while a nemesis hurts the cluster, heals it,
reads the final state, and checks the history: every operation's invocation and completion
(ok, fail, or info = unknown) with its time. Prints the anomalies found and a JSON summary;
exits 1 when a checker found an anomaly, 2 when the run itself could not be made.

Workloads:
  register  reads, writes and compare-and-sets (WATCH/GET/MULTI/SET/EXEC) on single keys,
            checked for linearizability (Wing & Gong with memoization, checkers.py); each key
            takes a bounded number of operations, then the clients move on to new keys
  counter   INCR on 10 shared counters: acknowledged <= final <= attempted
  set       HSET of unique fields into 3 hashes: every acknowledged add is present
  unique    SET of unique keys: every acknowledged write is present with its value

Nemeses: kill-restart (SIGKILL, restarted within a second at the same address), kill-late
(restarted after the failure timeout), kill-replace (SIGKILL, and at once a new member at another
address joins while the dead one is still listed), pause (SIGSTOP, SIGCONT), partition (one member cut
off both ways), bridge (two members cut from each other, the third sees both),
partition-master, rolling (SIGTERM and restart, member by member), mix (a random one each
round), none.

Usage: jepsen.py --grid-node PATH --grid-cli PATH [--workload W] [--nemesis N] [--time S]
                 [--quorum] [--clients N] [--seed N] [--failure-timeout-ms MS]
                 [--fault-s S] [--quiet-s S] [--warmup-s S]
                 [--workdir DIR] [--json FILE]
"""
import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time

import redis

import checkers
from cluster import Cluster, Nemesis

WORKLOADS = ["register", "counter", "set", "unique"]


class History:
    def __init__(self):
        self.ops = []
        self.nemesis = []
        self.lock = threading.Lock()
        self.t0 = time.monotonic()

    def now(self):
        return time.monotonic() - self.t0

    def add(self, op):
        with self.lock:
            self.ops.append(op)

    def note(self, text):
        with self.lock:
            self.nemesis.append({"time": round(self.now(), 3), "event": text})


def classify(error):
    """'fail' when the server certainly applied nothing, else 'info' (unknown)."""
    text = str(error)
    if isinstance(error, redis.exceptions.WatchError):
        # A conflict ("Watched variable changed.") applied nothing; redis-py also raises it when
        # the connection died around EXEC ("A ConnectionError occurred on while watching one or
        # more keys"): the EXEC may have been applied.
        return "fail" if "Watched variable changed" in text else "info"
    if isinstance(error, redis.exceptions.ResponseError):
        # kNoQuorum: refused before anything was applied (map_service.cc CheckQuorum).
        if "cluster members for writes" in text and "was not applied" in text:
            return "fail"
        return "info"
    if isinstance(error, redis.exceptions.ConnectionError) and text.startswith("Error ") \
            and "connecting to" in text:
        return "fail"  # never connected: never sent
    return "info"


class Client(threading.Thread):
    def __init__(self, process, node, workload, history, stop, keys, rng):
        super().__init__(daemon=True)
        self.process, self.node, self.workload = process, node, workload
        self.history, self.stop, self.keys, self.rng = history, stop, keys, rng
        self.count = 0
        self.last_read = {}
        self.conn = None

    def connect(self):
        self.conn = redis.Redis(host="127.0.0.1", port=self.node.resp_port, socket_timeout=2,
                                socket_connect_timeout=1, decode_responses=True)

    def run(self):
        self.connect()
        while not self.stop.is_set():
            f, key, value = self.keys.next(self)
            op = {"process": self.process, "f": f, "key": key, "value": value,
                  "invoke": self.history.now()}
            try:
                result = self.invoke(f, key, value)
                if f == "read":
                    op["value"] = result
                op["type"] = "fail" if result is FAILED else "ok"
                if f == "read" and result is not FAILED:
                    self.last_read[key] = result
            except Exception as e:  # noqa: BLE001 (every error is a history entry)
                op["type"] = "fail" if f == "read" else classify(e)
                op["error"] = str(e)[:200]
                self.connect()  # a fresh connection (the old one may be dead)
                time.sleep(0.05)
            op["complete"] = self.history.now()
            self.history.add(op)
            self.count += 1
            time.sleep(0.005)

    def invoke(self, f, key, value):
        r = self.conn
        if f == "read":
            return r.get(key)
        if f == "write":
            r.set(key, value)
            return None
        if f == "cas":
            old, new = value
            with r.pipeline() as p:
                p.watch(key)
                if p.get(key) != old:
                    p.unwatch()
                    return FAILED
                p.multi()
                p.set(key, new)
                p.execute()  # WatchError when the key changed since WATCH: nothing applied
            return None
        if f == "incr":
            r.incrby(key, value)
            return None
        if f == "add":
            r.hset(key, value, "1")
            return None
        raise ValueError(f)


FAILED = object()


class Keys:
    """What each client does next, per workload (thread-safe)."""

    def __init__(self, workload, rng):
        self.workload, self.rng = workload, rng
        self.lock = threading.Lock()
        self.n = 0

    def next(self, client):
        with self.lock:
            self.n += 1
            n = self.n
            pick = self.rng.random()
            choice = self.rng.randrange(1 << 30)
        tag = "%d-%d" % (client.process, n)
        if self.workload == "register":
            # Three keys at a time, about 150 operations each, then the next three.
            key = "r%d-%d" % (n // 450, choice % 3)
            if pick < 0.5:
                return "read", key, None
            if pick < 0.8:
                return "write", key, tag
            return "cas", key, (client.last_read.get(key), tag)
        if self.workload == "counter":
            return "incr", "c%d" % (choice % 10), 1
        if self.workload == "set":
            return "add", "s%d" % (choice % 3), tag
        return "write", "u:" + tag, tag


def final_state(cluster, workload, history, limit=60):
    """Reads what the run left, through the first member, retrying until it answers."""
    deadline = time.monotonic() + limit
    keys = sorted({op["key"] for op in history.ops})
    while True:
        try:
            r = redis.Redis(host="127.0.0.1", port=cluster.nodes[0].resp_port, socket_timeout=5,
                            decode_responses=True)
            if workload == "counter":
                return {k: int(r.get(k) or 0) for k in keys}
            if workload == "set":
                return {k: set(r.hkeys(k)) for k in keys}
            if workload == "unique":
                return {k: r.get(k) for k in keys}
            final = {}
            for k in keys:  # register: the final reads are operations of the history
                op = {"process": -1, "f": "read", "key": k, "invoke": history.now()}
                op["value"] = r.get(k)
                op["complete"] = history.now()
                op["type"] = "ok"
                final[k] = op
            for op in final.values():
                history.add(op)
            return {k: op["value"] for k, op in final.items()}
        except redis.exceptions.RedisError as e:
            if time.monotonic() > deadline:
                raise RuntimeError("final reads failed for %d s: %s" % (limit, e))
            time.sleep(0.5)


def check(workload, history, final):
    if workload == "counter":
        return checkers.check_counter(history.ops, final)
    if workload == "set":
        return checkers.check_set(history.ops, final)
    if workload == "unique":
        return checkers.check_unique(history.ops, final)
    return checkers.check_linearizable(history.ops)


def run(args):
    rng = random.Random(args.seed)
    workdir = args.workdir or tempfile.mkdtemp(prefix="tessera-jepsen-")
    os.makedirs(workdir, exist_ok=True)
    history = History()
    cluster = Cluster(args.grid_node, args.grid_cli, workdir, quorum=args.quorum,
                      failure_timeout_ms=args.failure_timeout_ms,
                      log=lambda m: print("jepsen:", m, file=sys.stderr))
    summary = {"workload": args.workload, "nemesis": args.nemesis, "quorum": args.quorum,
               "seconds": args.time, "seed": args.seed, "workdir": workdir}
    try:
        cluster.start()
        stop = threading.Event()
        keys = Keys(args.workload, rng)
        clients = [Client(i, cluster.nodes[i % len(cluster.nodes)], args.workload, history, stop,
                          keys, rng) for i in range(args.clients)]
        for c in clients:
            c.start()
        stop_at = time.monotonic() + args.time
        if args.nemesis != "none":
            time.sleep(min(args.warmup_s, max(0.0, stop_at - time.monotonic())))
            Nemesis(cluster, args.nemesis, rng, history.note, fault_s=args.fault_s,
                    quiet_s=args.quiet_s).run(stop_at)
        while time.monotonic() < stop_at:
            time.sleep(0.1)
        # Heal everything, then let the clients see the healed cluster for a moment.
        history.note("heal")
        for n in cluster.nodes:
            if n.paused:
                n.resume()
            if not n.running():
                n.start()
        cluster.heal()
        safe = cluster.wait_safe(60)
        time.sleep(1.0)
        stop.set()
        for c in clients:
            c.join(15)
        if not safe:
            summary["error"] = "the cluster did not become safe within 60 s of healing"
        final = final_state(cluster, args.workload, history)
        result = check(args.workload, history, final)
    finally:
        cluster.stop()
    ops = history.ops
    summary.update({
        "operations": len(ops),
        "ok": sum(1 for op in ops if op["type"] == "ok"),
        "failed": sum(1 for op in ops if op["type"] == "fail"),
        "unknown": sum(1 for op in ops if op["type"] == "info"),
        "acknowledged": result["acknowledged"],
        "lost": result["lost"],
        "valid": result["valid"] if "error" not in summary else False,
        "anomalies": result["anomalies"][:50],
        "anomaly_count": len(result["anomalies"]),
        "nemesis_log": history.nemesis,
    })
    with open(os.path.join(workdir, "history.jsonl"), "w") as f:
        for op in ops:
            f.write(json.dumps(op, default=list) + "\n")
    return summary


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--grid-node", required=True)
    p.add_argument("--grid-cli", required=True)
    p.add_argument("--workload", choices=WORKLOADS, default="counter")
    p.add_argument("--nemesis", choices=Nemesis.KINDS + ["none"], default="partition")
    p.add_argument("--time", type=float, default=30, help="seconds of workload under faults")
    p.add_argument("--quorum", action="store_true",
                   help="the RESP map 'default' gets min_cluster_size 2")
    p.add_argument("--clients", type=int, default=6)
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--failure-timeout-ms", type=int, default=2000)
    p.add_argument("--fault-s", type=float, default=6.0, help="seconds each fault lasts")
    p.add_argument("--quiet-s", type=float, default=4.0, help="seconds between faults")
    p.add_argument("--warmup-s", type=float, default=0.0,
                   help="seconds of load before the first fault (data for it to lose)")
    p.add_argument("--workdir", help="logs and history (default: a new temporary directory)")
    p.add_argument("--json", help="also write the summary here")
    p.add_argument("--keep", action="store_true", help="keep the work directory when valid")
    args = p.parse_args()
    # SIGTERM (a test runner stopping the run) unwinds like an error: the members are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    try:
        summary = run(args)
    except Exception as e:  # noqa: BLE001
        print("ERROR the run failed: %s" % e)
        return 2
    for a in summary["anomalies"]:
        print("ANOMALY", a)
    if summary.get("error"):
        print("ERROR", summary["error"])
    print(json.dumps({k: v for k, v in summary.items() if k != "anomalies"}, default=list))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1, default=list)
    valid = summary["valid"] is True or summary["valid"] == "unknown"
    if valid and not args.keep and not args.workdir:
        shutil.rmtree(summary["workdir"], ignore_errors=True)
    print("%s: %s under %s%s: %d operations, %d acknowledged, %d lost, %d unknown, valid=%s"
          % ("PASS" if valid else "FAIL", args.workload, args.nemesis,
             " (quorum)" if args.quorum else "", summary["operations"], summary["acknowledged"],
             summary["lost"], summary["unknown"], summary["valid"]))
    return 0 if valid else 1


if __name__ == "__main__":
    sys.exit(main())
