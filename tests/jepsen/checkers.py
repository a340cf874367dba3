"""Checkers of a recorded history (docs/reliability.md).

A history is a list of operations, each a dict:
  {"process": int, "f": str, "key": str, "value": ..., "type": "ok" | "fail" | "info",
   "invoke": float, "complete": float}
`invoke` and `complete` are monotonic seconds; "ok" took effect, "fail" certainly did not
(the server refused it before applying anything), "info" may or may not have (a timeout, a
lost connection, an error that does not say). An "info" operation's `complete` is when the
client gave up on it; it may take effect any time after its invocation.

Each checker returns a dict: {"valid": True | False | "unknown", "anomalies": [str], ...counts}.
"""

INF = float("inf")


def check_unique(history, final):
    """Unique writes: every key written once; `final` maps key -> value read after the run
    (None when missing). An acknowledged write that is missing or different is lost."""
    acked = [op for op in history if op["f"] == "write" and op["type"] == "ok"]
    unknown = [op for op in history if op["f"] == "write" and op["type"] == "info"]
    anomalies = []
    for op in acked:
        got = final.get(op["key"])
        if got != op["value"]:
            anomalies.append("lost write: %s = %r acknowledged at %.3f s, read back %r"
                             % (op["key"], op["value"], op["complete"], got))
    attempted = {op["key"]: op["value"] for op in acked + unknown}
    for key, got in final.items():
        if got is not None and attempted.get(key) != got:
            anomalies.append("phantom: %s = %r was never written" % (key, got))
    return {"valid": not anomalies, "anomalies": anomalies, "acknowledged": len(acked),
            "unknown": len(unknown), "lost": sum(1 for a in anomalies if a.startswith("lost"))}


def check_counter(history, final):
    """Counters: per key, acknowledged increments <= final value <= attempted increments
    (acknowledged + unknown). `final` maps key -> int read after the run."""
    anomalies = []
    acked_total = unknown_total = lost = 0
    keys = sorted({op["key"] for op in history if op["f"] == "incr"} | set(final))
    for key in keys:
        ops = [op for op in history if op["f"] == "incr" and op["key"] == key]
        acked = sum(op["value"] for op in ops if op["type"] == "ok")
        unknown = sum(op["value"] for op in ops if op["type"] == "info")
        acked_total += acked
        unknown_total += unknown
        got = final.get(key, 0) or 0
        if got < acked:
            lost += acked - got
            anomalies.append("lost increments: %s is %d, %d increments were acknowledged"
                             % (key, got, acked))
        if got > acked + unknown:
            anomalies.append("extra increments: %s is %d, at most %d were attempted "
                             "(%d acknowledged, %d unknown)" % (key, got, acked + unknown,
                                                              acked, unknown))
    return {"valid": not anomalies, "anomalies": anomalies, "acknowledged": acked_total,
            "unknown": unknown_total, "lost": lost}


def check_set(history, final):
    """A grow-only set per key: every acknowledged add is present after the run; nothing is
    present that was never attempted. `final` maps key -> set of elements."""
    anomalies = []
    acked_n = unknown_n = lost = 0
    keys = sorted({op["key"] for op in history if op["f"] == "add"} | set(final))
    for key in keys:
        ops = [op for op in history if op["f"] == "add" and op["key"] == key]
        acked = {op["value"] for op in ops if op["type"] == "ok"}
        attempted = acked | {op["value"] for op in ops if op["type"] == "info"}
        acked_n += len(acked)
        unknown_n += sum(1 for op in ops if op["type"] == "info")
        got = final.get(key, set())
        missing = sorted(acked - got)
        lost += len(missing)
        if missing:
            anomalies.append("lost adds: %s lacks %d acknowledged element(s), e.g. %s"
                             % (key, len(missing), missing[:5]))
        extra = sorted(got - attempted)
        if extra:
            anomalies.append("phantom adds: %s holds %s, never added" % (key, extra[:5]))
    return {"valid": not anomalies, "anomalies": anomalies, "acknowledged": acked_n,
            "unknown": unknown_n, "lost": lost}


# --- Linearizability of single-key registers (Wing & Gong, with Lowe's memoization, as in
# Porcupine): search for an order of the operations, each placed between its invocation and
# its completion, in which every read returns the last value written.

def register_step(state, op):
    """The register model: (ok, next state). `state` is the value, None when absent."""
    f, value, kind = op["f"], op["value"], op["type"]
    if f == "read":
        return value == state, state
    if f == "write":
        return True, value
    if f == "cas":
        old, new = value
        if kind == "info":  # unknown: it applied if the register held `old`, else it failed
            return True, new if state == old else state
        return state == old, new
    raise ValueError("not a register operation: %r" % f)


class _Entry:
    __slots__ = ("op", "index", "is_call", "match", "prev", "next")

    def __init__(self, op, index, is_call):
        self.op, self.index, self.is_call = op, index, is_call
        self.match = self.prev = self.next = None


def _linearizable(ops, step, initial, budget):
    """(True | False | "unknown", detail) for the operations of one key."""
    events = []
    for i, op in enumerate(ops):
        done = INF if op["type"] == "info" else op["complete"]
        events.append((op["invoke"], 0, i, True))
        events.append((done, 1, i, False))
    events.sort(key=lambda e: (e[0], e[1]))  # calls before returns at the same instant
    head = _Entry(None, -1, False)
    calls_by_index = {}
    prev = head
    for _, _, i, is_call in events:
        e = _Entry(ops[i], i, is_call)
        if is_call:
            calls_by_index[i] = e
        else:
            calls_by_index[i].match = e
        prev.next, e.prev = e, prev
        prev = e

    def lift(e):
        e.prev.next = e.next
        if e.next:
            e.next.prev = e.prev
        m = e.match
        m.prev.next = m.next
        if m.next:
            m.next.prev = m.prev

    def unlift(e):
        m = e.match
        m.prev.next = m
        if m.next:
            m.next.prev = m
        e.prev.next = e
        if e.next:
            e.next.prev = e

    state, linearized = initial, 0
    cache = set()
    stack = []
    entry = head.next
    steps = 0
    deepest = 0
    stuck_at = None
    while head.next is not None:
        steps += 1
        if steps > budget:
            return "unknown", "search budget of %d steps spent" % budget
        if entry.is_call:
            ok, nxt = step(state, entry.op)
            if ok:
                bits = linearized | (1 << entry.index)
                if (bits, nxt) not in cache:
                    cache.add((bits, nxt))
                    stack.append((entry, state))
                    state, linearized = nxt, bits
                    lift(entry)
                    entry = head.next
                    if len(stack) > deepest:
                        deepest = len(stack)
                        stuck_at = None
                    continue
            entry = entry.next
        else:
            # A completion before which nothing more can be placed: back up.
            if len(stack) == deepest and stuck_at is None:
                stuck_at = (entry.op, state)
            if not stack:
                op, st = stuck_at if stuck_at else (entry.op, state)
                return False, ("no order of the %d operations fits: after %d of them, the "
                               "register holding %r, %s by process %d (%.3f-%.3f s) cannot be "
                               "placed" % (len(ops), deepest, st, _describe(op),
                                           op["process"], op["invoke"], op["complete"]))
            entry, state = stack.pop()
            linearized &= ~(1 << entry.index)
            unlift(entry)
            entry = entry.next
    return True, "%d operations" % len(ops)


def _describe(op):
    if op["f"] == "read":
        return "a read of %r" % (op["value"],)
    if op["f"] == "write":
        return "a write of %r" % (op["value"],)
    return "a cas %r -> %r (%s)" % (op["value"][0], op["value"][1], op["type"])


def check_linearizable(history, budget=2_000_000):
    """Per key (registers compose), whether the reads, writes and compare-and-sets form a
    linearizable history. Failed operations took no effect and are left out, as are reads of
    unknown outcome (they changed nothing)."""
    by_key = {}
    for op in history:
        if op["f"] not in ("read", "write", "cas") or op["type"] == "fail":
            continue
        if op["f"] == "read" and op["type"] != "ok":
            continue
        by_key.setdefault(op["key"], []).append(op)
    anomalies, unknown_keys = [], []
    for key in sorted(by_key):
        verdict, detail = _linearizable(by_key[key], register_step, None, budget)
        if verdict is False:
            anomalies.append("not linearizable: key %s: %s" % (key, detail))
        elif verdict == "unknown":
            unknown_keys.append(key)
    valid = False if anomalies else ("unknown" if unknown_keys else True)
    ops = [op for op in history if op["f"] in ("read", "write", "cas")]
    return {"valid": valid, "anomalies": anomalies, "keys": len(by_key),
            "undecided_keys": unknown_keys,
            "acknowledged": sum(1 for op in ops if op["type"] == "ok"),
            "unknown": sum(1 for op in ops if op["type"] == "info"), "lost": 0}
