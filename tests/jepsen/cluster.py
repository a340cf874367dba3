"""Real grid-node processes on 127.0.0.1 for the Jepsen-style harness, and the nemeses that
hurt them: SIGKILL with an immediate restart or one after the failure timeout, SIGSTOP and
SIGCONT, a killed member replaced at once by a new one at another address, network partitions through `grid-cli fault` (one member cut off, a bridge, the
master cut off), SIGTERM rolling restarts, and mixes of them.

Every process started here is stopped by Cluster.stop (the runner calls it on every exit)."""
import ctypes
import fcntl
import json
import os
import random
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request


def _die_with_parent():
    """In the child before exec: SIGKILL it when the harness dies (a test runner's timeout
    kills the harness with SIGKILL, and its members must not outlive it)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


_held_port_locks = []


def free_ports(count):
    """`count` distinct loopback ports with nothing listening, below the kernel's ephemeral
    range (32768-60999 by default): neither `bind(0)` nor an outgoing connection's local end
    takes one of them while its member is down and about to be restarted there. Harnesses
    and the C++ tests (tests/integration/child_process.cc UnusedPort) agree through a lock
    file per port, held until this process exits."""
    first, span = 20000, 12000
    lock_dir = os.path.join(tempfile.gettempdir(), "tessera-test-ports")
    os.makedirs(lock_dir, exist_ok=True)
    ports = []
    offset = os.getpid() * 7919 % span
    for tried in range(span):
        if len(ports) == count:
            break
        port = first + (offset + tried) % span
        fd = os.open(os.path.join(lock_dir, "%d.lock" % port), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port))
        except OSError:
            os.close(fd)
            continue
        _held_port_locks.append(fd)
        ports.append(port)
    if len(ports) < count:
        raise RuntimeError("no %d free loopback ports in %d-%d" % (count, first, first + span - 1))
    return ports


class Node:
    """One member with fixed ports, so that it can be started again where it was."""

    def __init__(self, index, cluster, ports):
        self.index = index
        self.cluster = cluster
        self.port, self.resp_port, self.http_port = ports
        self.proc = None
        self.paused = False
        self.starts = 0
        self.log_path = os.path.join(cluster.workdir, "node%d.log" % index)

    @property
    def address(self):
        return "127.0.0.1:%d" % self.port

    def start(self):
        c = self.cluster
        args = [c.grid_node, "--port", str(self.port), "--resp-port", str(self.resp_port),
                "--http-port", str(self.http_port), "--threads", "2",
                "--log-level", os.environ.get("TESSERA_JEPSEN_LOG_LEVEL", "info"),
                "--fault-injection", "true",
                "--heartbeat-ms", str(c.heartbeat_ms),
                "--failure-timeout-ms", str(c.failure_timeout_ms),
                "--join-timeout-ms", str(c.join_timeout_ms)]
        if c.config_path:
            args += ["--config", c.config_path]
        # The first member starts the cluster; every other start (and every restart, the
        # first member's too) joins through the other members, as a unit file listing the
        # cluster's members as seeds would.
        if self.index > 0 or self.starts > 0:
            args += ["--join", ",".join(n.address for n in c.nodes if n is not self)]
        self.starts += 1
        log = open(self.log_path, "ab")
        log.write(("\n=== start %s at %.3f\n" % (" ".join(args), time.monotonic())).encode())
        log.flush()
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log,
                                     stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        log.close()
        line = self.proc.stdout.readline().decode()
        if "ready" not in line:
            raise RuntimeError("node %d did not start: %r (log %s)" % (self.index, line,
                                                                      self.log_path))
        self.paused = False

    def move(self, ports):
        """A new member in this one's place: other ports, so a new address (and identity); the
        old address stays in the cluster's view until its failure timeout removes it."""
        self.port, self.resp_port, self.http_port = ports

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.running():
            self.proc.send_signal(sig)

    def kill(self):
        if self.proc is not None:
            if self.paused:
                self.signal(signal.SIGCONT)
            self.signal(signal.SIGKILL)
            self.proc.wait()
            self.proc.stdout.close()
            self.proc = None
            self.paused = False

    def terminate(self, timeout=20):
        if self.proc is None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.proc = None

    def pause(self):
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self):
        self.signal(signal.SIGCONT)
        self.paused = False

    def http(self, path, timeout=2):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.http_port, path),
                                        timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError as e:
            return 0, str(e)


class Cluster:
    def __init__(self, grid_node, grid_cli, workdir, size=3, quorum=False,
                 failure_timeout_ms=2000, heartbeat_ms=200, join_timeout_ms=1500, log=print):
        self.grid_node = grid_node
        self.grid_cli = grid_cli
        self.workdir = workdir
        self.failure_timeout_ms = failure_timeout_ms
        self.heartbeat_ms = heartbeat_ms
        self.join_timeout_ms = join_timeout_ms
        self.log = log
        self.config_path = None
        if quorum:
            self.config_path = os.path.join(workdir, "quorum.yaml")
            with open(self.config_path, "w") as f:
                f.write("maps:\n  default: {min_cluster_size: %d}\n" % (size // 2 + 1))
        ports = free_ports(3 * size)
        self.nodes = [Node(i, self, ports[3 * i:3 * i + 3]) for i in range(size)]
        self.blocked = False

    def start(self):
        for n in self.nodes:
            n.start()
        self.wait_safe(60)

    def stop(self):
        for n in self.nodes:
            n.kill()

    def cli(self, node, *args, timeout=10):
        r = subprocess.run([self.grid_cli, "--address", node.address, "--timeout", "3000"] +
                           list(args), capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr

    def master(self):
        """The master as a running member sees it (None if none answers)."""
        for n in self.nodes:
            if not n.running() or n.paused:
                continue
            code, out, _ = self.cli(n, "--json", "members")
            if code == 0:
                master = json.loads(out).get("master")
                for m in self.nodes:
                    if m.address == master:
                        return m
        return None

    def wait_safe(self, limit):
        """Until every member is running and its /health/safe answers 200 (bounded)."""
        deadline = time.monotonic() + limit
        reasons = ""
        while time.monotonic() < deadline:
            answers = [n.http("/health/safe") for n in self.nodes]
            if all(code == 200 for code, _ in answers):
                # One view: every member lists every member.
                sizes = set()
                for n in self.nodes:
                    code, out, _ = self.cli(n, "--json", "members")
                    sizes.add(len(json.loads(out)["members"]) if code == 0 else -1)
                if sizes == {len(self.nodes)}:
                    return True
            reasons = "; ".join("node%d: %s" % (n.index, body[:160])
                                for n, (code, body) in zip(self.nodes, answers) if code != 200)
            time.sleep(0.2)
        self.log("cluster not safe after %d s: %s" % (limit, reasons))
        return False

    # --- faults

    def block(self, node, others):
        if not others:
            return
        code, out, err = self.cli(node, "fault", "block", ",".join(o.address for o in others))
        if code != 0:
            self.log("fault block on node%d failed: %s" % (node.index, (out + err).strip()))
        self.blocked = True

    def heal(self):
        for n in self.nodes:
            if n.running():
                self.cli(n, "fault", "heal")
        self.blocked = False

    def partition(self, side_a, side_b):
        for a in side_a:
            self.block(a, side_b)
        for b in side_b:
            self.block(b, side_a)


class Nemesis:
    """Alternates faults and quiet periods: `fault_s` seconds of fault, then healed, then
    `quiet_s` seconds of quiet. Records each step in the history as a "nemesis" entry."""

    KINDS = ["kill-restart", "kill-late", "kill-replace", "pause", "partition", "bridge",
             "partition-master", "rolling", "mix"]

    def __init__(self, cluster, kind, rng, record, fault_s=6.0, quiet_s=4.0):
        if kind not in self.KINDS:
            raise ValueError("unknown nemesis %r; one of %s" % (kind, ", ".join(self.KINDS)))
        self.cluster, self.kind, self.rng, self.record = cluster, kind, rng, record
        self.fault_s, self.quiet_s = fault_s, quiet_s

    def run(self, stop_at):
        while time.monotonic() + 1 < stop_at:
            kind = self.kind
            if kind == "mix":
                kind = self.rng.choice(self.KINDS[:-1])
            self.record("start " + kind)
            getattr(self, kind.replace("-", "_"))(stop_at)
            self.record("end " + kind)
            self.sleep_until(min(stop_at, time.monotonic() + self.quiet_s))

    def sleep_until(self, t):
        while time.monotonic() < t:
            time.sleep(min(0.1, max(0.0, t - time.monotonic())))

    def victim(self):
        return self.rng.choice(self.cluster.nodes)

    def kill_restart(self, stop_at):
        n = self.victim()
        n.kill()
        time.sleep(self.rng.uniform(0.1, 0.8))
        n.start()
        self.sleep_until(min(stop_at, time.monotonic() + self.fault_s))

    def kill_late(self, stop_at):
        n = self.victim()
        n.kill()
        time.sleep(self.cluster.failure_timeout_ms / 1000 * 1.5)
        n.start()
        self.sleep_until(min(stop_at, time.monotonic() + self.fault_s / 2))

    def kill_replace(self, stop_at):
        """SIGKILL, then at once a new member at another address joins: the dead one is still
        listed (until the failure timeout), so the table that adds the new member may name the
        dead one as the source of the new member's copies."""
        n = self.victim()
        n.kill()
        n.move(free_ports(3))
        time.sleep(self.rng.uniform(0.0, 0.3))
        n.start()
        self.sleep_until(min(stop_at, time.monotonic() + self.fault_s))

    def pause(self, stop_at):
        n = self.victim()
        n.pause()
        self.sleep_until(min(stop_at, time.monotonic() + self.fault_s))
        n.resume()

    def partition(self, stop_at):
        n = self.victim()
        rest = [m for m in self.cluster.nodes if m is not n]
        self.cluster.partition([n], rest)
        self.sleep_until(min(stop_at, time.monotonic() + self.fault_s))
        self.cluster.heal()

    def bridge(self, stop_at):
        nodes = list(self.cluster.nodes)
        self.rng.shuffle(nodes)
        a, b = nodes[0], nodes[1]  # cut from each other; the rest see both
        self.cluster.partition([a], [b])
        self.sleep_until(min(stop_at, time.monotonic() + self.fault_s))
        self.cluster.heal()

    def partition_master(self, stop_at):
        m = self.cluster.master() or self.victim()
        rest = [n for n in self.cluster.nodes if n is not m]
        self.cluster.partition([m], rest)
        self.sleep_until(min(stop_at, time.monotonic() + self.fault_s))
        self.cluster.heal()

    def rolling(self, stop_at):
        for n in self.cluster.nodes:
            if time.monotonic() > stop_at:
                break
            n.terminate()
            n.start()
            self.cluster.wait_safe(30)
