"""What the real-client tests share (issue 19): redis-server and grid-node started side by
side on loopback ports, one sequence of steps run against each, the outcomes compared, and
checks that print ok/FAIL. A test module calls run(sequence, tessera_only)."""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

import redis

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ping(port, proc, name):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited with {proc.returncode} before answering PING")
        try:
            if redis.Redis(port=port, socket_timeout=1).ping():
                return
        except (redis.ConnectionError, redis.TimeoutError):
            time.sleep(0.1)
    raise SystemExit(f"{name} did not answer PING on port {port} within 30 s")


def outcome(fn):
    """The reply, or the error's class and message: comparable across servers."""
    try:
        reply = fn()
    except redis.RedisError as e:
        return ("error", type(e).__name__, str(e))
    if isinstance(reply, list):
        return [("error", type(x).__name__, str(x)) if isinstance(x, Exception) else x
                for x in reply]
    return reply


def run(sequence, tessera_only):
    """sequence(port) -> [(name, outcome)] runs on both servers and the outcomes are compared;
    then tessera_only(port) checks what only grid-node does. Exits 1 naming every failure."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--grid-node", required=True)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="tessera-redis-py.")
    procs = []
    try:
        redis_port, node_port, resp_port = free_port(), free_port(), free_port()
        procs.append(subprocess.Popen(
            ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"], stdout=open(os.path.join(work, "redis.log"), "w"),
            stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen(
            [args.grid_node, "--port", str(node_port), "--resp-port", str(resp_port),
             "--log-level", "warn"], stdout=open(os.path.join(work, "grid-node.log"), "w"),
            stderr=subprocess.STDOUT))
        wait_ping(redis_port, procs[0], "redis-server")
        wait_ping(resp_port, procs[1], "grid-node")

        expected = sequence(redis_port)
        got = sequence(resp_port)
        check(len(expected) == len(got), f"both ran {len(expected)} steps ({len(got)})")
        for (name, want), (_, have) in zip(expected, got):
            check(want == have, f"{name}: redis {want!r}, tessera {have!r}")
        tessera_only(resp_port)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    if failures:
        print(f"{len(failures)} check(s) failed; logs in {work}")
        sys.exit(1)
    print("all checks passed")
