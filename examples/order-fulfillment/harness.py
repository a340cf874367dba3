"""Runs the order-fulfillment example's processes for scripts/demo-orders and
scripts/chaos-orders: a shared cluster of grid-node processes and instances of the three
services, on 127.0.0.1 with ports picked by the processes (read back from their ready lines).
Every process started here is stopped by Cluster.stop_all(); logs go to the work folder, and
so do their data directories (WORK/data/NAME: every grid-node and every service instance keeps
its data there, so that restart_all() brings back everything acknowledged)."""
import json
import os
import re
import select
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

READY = re.compile(r"ready: native 127\.0\.0\.1:(\d+)")
HTTP = re.compile(r" http 127\.0\.0\.1:(\d+)")  # a service's REST port, a grid-node's --http-port
MEMBER_HTTP = re.compile(r" member-http 127\.0\.0\.1:(\d+)")  # a service's --member-http-port
# The shared grid-nodes' log level: warn, or e.g. info or debug to follow a failed chaos run's
# migrations (their logs stay in the work folder with --keep, and when a run fails).
NODE_LOG_LEVEL = os.environ.get("TESSERA_CHAOS_NODE_LOG_LEVEL", "warn")
# The services' log level (info: every hold transition and decision of inventory-service).
SERVICE_LOG_LEVEL = os.environ.get("TESSERA_CHAOS_SERVICE_LOG_LEVEL", "warn")


class Proc:
    def __init__(self, name, argv, work):
        self.name, self.argv, self.work = name, argv, work
        self.popen = None
        self.native = self.http = self.member_http = None
        self.paused = False

    def start(self, timeout=60.0):
        self.launch()
        return self.wait_ready(timeout)

    def launch(self):
        """Starts the process without waiting for its ready line (wait_ready)."""
        self.log = open(os.path.join(self.work, self.name + ".log"), "ab")
        self.popen = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=self.log,
                                      stdin=subprocess.DEVNULL)

    def wait_ready(self, timeout=60.0):
        log = self.log
        deadline = time.monotonic() + timeout
        line = b""
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.popen.returncode} before it was "
                                   f"ready; see {log.name}")
            ready, _, _ = select.select([self.popen.stdout], [], [], 0.2)
            if not ready:
                continue
            chunk = os.read(self.popen.stdout.fileno(), 4096)
            line += chunk
            m = READY.search(line.decode(errors="replace"))
            if m:
                self.native = f"127.0.0.1:{m.group(1)}"
                h = HTTP.search(line.decode(errors="replace"))
                self.http = f"http://127.0.0.1:{h.group(1)}" if h else None
                h = MEMBER_HTTP.search(line.decode(errors="replace"))
                self.member_http = f"http://127.0.0.1:{h.group(1)}" if h else None
                return self
        self.kill()
        raise RuntimeError(f"{self.name} was not ready within {timeout:.0f} s; see {log.name}")

    def running(self):
        return self.popen is not None and self.popen.poll() is None

    def signal(self, sig):
        if self.running():
            self.popen.send_signal(sig)

    def pause(self):
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self):
        self.signal(signal.SIGCONT)
        self.paused = False

    def kill(self):
        if self.popen is None:
            return
        if self.paused:
            self.resume()
        self.signal(signal.SIGKILL)
        self.popen.wait()

    def stop(self, timeout=20.0):
        """SIGTERM, then SIGKILL after `timeout` s; the exit status (None: was not running)."""
        if not self.running():
            return None
        if self.paused:
            self.resume()
        self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return -signal.SIGKILL


class Cluster:
    """The shared grid-node cluster and the services, built from `bin_dir` (a CMake build)."""

    def __init__(self, bin_dir, work, fast=True):
        self.bin_dir, self.work = bin_dir, work
        self.procs = []
        self.shared = []
        self.fast = ["--heartbeat-ms", "250", "--failure-timeout-ms", "2000"] if fast else []

    def path(self, *parts):
        return os.path.join(self.bin_dir, *parts)

    def data_dir(self, name):
        """The data directory of the process `name` (kept across its restarts)."""
        return os.path.join(self.work, "data", name)

    def _shared_argv(self, name, port, join):
        argv = [self.path("tools", "grid-node", "grid-node"), "--port", str(port),
                "--cluster-name", "shared", "--log-level", NODE_LOG_LEVEL, "--threads", "1",
                "--data-dir", self.data_dir(name)] + self.fast
        if join is not None:
            argv += ["--join", join.native, "--join-timeout-ms", "2000"]
        return argv

    def start_shared(self, count=3, http=False):
        """Starts `count` grid-nodes; with `http`, each serves HTTP (--http-port 0: health,
        metrics, the REST API and the console) at its Proc's .http."""
        for i in range(count):
            name = f"grid-node-{i + 1}"
            argv = self._shared_argv(name, 0, self.shared[0] if self.shared else None)
            if http:
                argv += ["--http-port", "0"]
            self.shared.append(self._start(Proc(name, argv, self.work)))
        return self.shared

    def restart_shared(self, node):
        alive = [n for n in self.shared if n is not node and n.running()]
        node.argv = self._shared_argv(node.name, node.native.split(":")[1],
                                      alive[0] if alive else None)
        return node.start()

    def restart_all(self, groups):
        """SIGKILLs every process at once (the shared grid-nodes and every service instance),
        then starts them again on their data directories: the grid-nodes at their ports (the
        address the services know), the first one alone and the others joining it; then each
        of `groups` (a list of instances of one service) together, the first at its port and
        the others joining it. Each cluster recovers once all of its last members are back."""
        procs = [p for p in self.procs if p.running()]
        for p in procs:
            if p.paused:
                p.resume()
            p.signal(signal.SIGKILL)
        for p in procs:
            p.popen.wait()
        first = self.shared[0]
        first.argv = self._shared_argv(first.name, first.native.split(":")[1], None)
        first.start()
        for n in self.shared[1:]:
            n.argv = self._shared_argv(n.name, n.native.split(":")[1], first)
            n.launch()
        for n in self.shared[1:]:
            n.wait_ready()
        for group in groups:
            self._restart_argv(group[0], None, same_address=True)
            group[0].launch()
            for p in group[1:]:
                self._restart_argv(p, group[0], same_address=False)
                p.launch()
            for p in group:
                p.wait_ready()
        self.write_addresses()

    def service(self, kind, index=1, extra=(), join=None):
        """Starts `kind`-service (order, inventory, payment); `join` is another instance."""
        argv = self._service_argv(kind, index, 0, extra)
        if join is not None:
            argv += ["--join", join.native]
        return self._start(Proc(f"{kind}-{index}", argv, self.work))

    def services(self, kind, count, extra=()):
        """Starts `count` instances of `kind`-service together, the others joining the first
        (on a port picked here): an instance whose --min-cluster-size needs the others serves
        only once they are in its cluster."""
        if count == 1:
            return [self.service(kind, 1, extra)]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        procs = []
        for i in range(count):
            argv = self._service_argv(kind, i + 1, port if i == 0 else 0, extra)
            if i > 0:
                argv += ["--join", f"127.0.0.1:{port}"]
            procs.append(Proc(f"{kind}-{i + 1}", argv, self.work))
        for p in procs:
            self.procs.append(p)
            p.launch()
        for p in procs:
            p.wait_ready()
        self.write_addresses()
        return procs

    def _service_argv(self, kind, index, port, extra):
        argv = [self.path("examples", "order-fulfillment", f"{kind}-service"), "--port",
                str(port), "--http-port", "0", "--log-level", SERVICE_LOG_LEVEL,
                "--data-dir", self.data_dir(f"{kind}-{index}")] + self.fast
        for n in self.shared:
            argv += ["--shared", n.native]
        return argv + list(extra)

    def restart(self, proc, join=None, same_address=False):
        """Starts `proc` again with its arguments and data directory (a new embedded member on
        a new port, or with `same_address` on the port it had)."""
        self._restart_argv(proc, join, same_address)
        return proc.start()

    def _restart_argv(self, proc, join, same_address):
        argv = [a for a in proc.argv]
        if "--join" in argv:
            i = argv.index("--join")
            del argv[i:i + 2]
        argv[argv.index("--port") + 1] = proc.native.split(":")[1] if same_address else "0"
        if join is not None:
            argv += ["--join", join.native]
        proc.argv = argv

    def _start(self, proc):
        self.procs.append(proc)
        proc.start()
        self.write_addresses()
        return proc

    def write_addresses(self):
        """cluster.json in the work folder: each process's pid and addresses (for grid-cli)."""
        doc = {p.name: {"pid": p.popen.pid if p.popen else None, "native": p.native,
                        "http": p.http} for p in self.procs}
        with open(os.path.join(self.work, "cluster.json"), "w") as f:
            json.dump(doc, f, indent=1)

    def stop_all(self):
        """Stops every process still running; the (name, status) of those that did not exit
        with 0 when asked to stop (a crash, a sanitizer report, a hang)."""
        bad = []
        for p in reversed(self.procs):
            try:
                status = p.stop(timeout=10)
            except Exception:  # noqa: BLE001 - stop everything we can
                p.kill()
                status = "error"
            if status not in (None, 0):
                bad.append((p.name, status))
        return bad

    def grid_cli(self, *args, timeout=60):
        argv = [self.path("tools", "grid-cli", "grid-cli"), "--address",
                next(n.native for n in self.shared if n.running()), "--cluster-name", "shared"]
        return subprocess.run(argv + list(args), capture_output=True, text=True, timeout=timeout)


    def member_cli(self, proc, *args, timeout=60):
        """grid-cli against a service instance's embedded member (its own cluster)."""
        kind = proc.name.rsplit("-", 1)[0]
        argv = [self.path("tools", "grid-cli", "grid-cli"), "--address", proc.native,
                "--cluster-name", f"{kind}-service"]
        return subprocess.run(argv + list(args), capture_output=True, text=True, timeout=timeout)


def http(method, url, body=None, timeout=10.0):
    """(status, parsed JSON body); a connection error is status 0 with the reason."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, {"raw": raw.decode(errors="replace")}
    except (urllib.error.URLError, OSError) as e:
        return 0, {"error": str(e)}


def wait_for(what, predicate, timeout, interval=0.1):
    """Polls `predicate` until it returns a true value (returned) or `timeout` s pass (None)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return None
