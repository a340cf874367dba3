#!/usr/bin/python3
"""Each checker of checkers.py passes a correct history and catches a planted anomaly: a
write dropped from the store, a stale read, a lost increment, a lost add. Exits 1 naming the
first check that does not hold."""
import random
import sys

import checkers


def op(process, f, key, value, kind, invoke, complete):
    return {"process": process, "f": f, "key": key, "value": value, "type": kind,
            "invoke": invoke, "complete": complete}


failures = []
checks = 0


def expect(name, result, valid):
    global checks
    checks += 1
    if result["valid"] != valid:
        failures.append("%s: expected valid=%r, got %r (%s)" % (name, valid, result["valid"],
                                                                 result["anomalies"]))


def unique():
    h = [op(0, "write", "u1", "1", "ok", 0.0, 0.1), op(1, "write", "u2", "2", "ok", 0.0, 0.2),
         op(2, "write", "u3", "3", "info", 0.1, 0.3)]
    expect("unique: all present", checkers.check_unique(h, {"u1": "1", "u2": "2", "u3": None}),
           True)
    expect("unique: the unknown write applied", checkers.check_unique(
        h, {"u1": "1", "u2": "2", "u3": "3"}), True)
    r = checkers.check_unique(h, {"u1": "1", "u2": None, "u3": None})
    expect("unique: a dropped acknowledged write", r, False)
    if r["lost"] != 1:
        failures.append("unique: lost should be 1, is %d" % r["lost"])
    expect("unique: a value never written", checkers.check_unique(
        h, {"u1": "1", "u2": "2", "u3": None, "u9": "9"}), False)


def counter():
    h = [op(0, "incr", "c", 1, "ok", 0, 1), op(1, "incr", "c", 1, "ok", 0, 1),
         op(2, "incr", "c", 1, "info", 0, 1), op(3, "incr", "c", 1, "fail", 0, 1)]
    expect("counter: acknowledged only", checkers.check_counter(h, {"c": 2}), True)
    expect("counter: with the unknown one", checkers.check_counter(h, {"c": 3}), True)
    r = checkers.check_counter(h, {"c": 1})
    expect("counter: an acknowledged increment lost", r, False)
    if r["lost"] != 1:
        failures.append("counter: lost should be 1, is %d" % r["lost"])
    expect("counter: a refused increment applied", checkers.check_counter(h, {"c": 4}), False)


def grow_set():
    h = [op(0, "add", "s", "a", "ok", 0, 1), op(1, "add", "s", "b", "info", 0, 1),
         op(2, "add", "s", "c", "fail", 0, 1)]
    expect("set: acknowledged present", checkers.check_set(h, {"s": {"a"}}), True)
    expect("set: an acknowledged add lost", checkers.check_set(h, {"s": {"b"}}), False)
    expect("set: a refused add present", checkers.check_set(h, {"s": {"a", "c"}}), False)


def registers():
    global checks
    lin = checkers.check_linearizable
    # Sequential: write 1, read 1, cas 1->2, read 2.
    seq = [op(0, "write", "r", "1", "ok", 0.0, 0.1), op(1, "read", "r", "1", "ok", 0.2, 0.3),
           op(0, "cas", "r", ("1", "2"), "ok", 0.4, 0.5), op(1, "read", "r", "2", "ok", 0.6, 0.7)]
    expect("register: sequential", lin(seq), True)
    # A stale read: after the cas completed, a read that begins later sees the old value.
    stale = seq + [op(2, "read", "r", "1", "ok", 0.8, 0.9)]
    expect("register: a stale read inserted", lin(stale), False)
    # A write dropped from the store: its read never happens... a read of a value no write
    # in the history produced.
    dropped = [op(0, "write", "r", "1", "ok", 0.0, 0.1), op(1, "read", "r", "7", "ok", 0.2, 0.3)]
    expect("register: a read of a value never written", lin(dropped), False)
    # An acknowledged write lost: it completed, and a later read sees the value before it.
    lost = [op(0, "write", "r", "1", "ok", 0.0, 0.1), op(1, "write", "r", "2", "ok", 0.2, 0.3),
            op(2, "read", "r", "1", "ok", 0.4, 0.5)]
    expect("register: an acknowledged write lost", lin(lost), False)
    # Concurrent: a read overlapping a write may see either value.
    conc = [op(0, "write", "r", "1", "ok", 0.0, 0.1), op(1, "write", "r", "2", "ok", 0.2, 0.6),
            op(2, "read", "r", "1", "ok", 0.3, 0.4), op(3, "read", "r", "2", "ok", 0.35, 0.5),
            op(2, "read", "r", "2", "ok", 0.7, 0.8)]
    expect("register: reads concurrent with a write", lin(conc), True)
    # An unknown write may take effect long after its client gave up on it...
    late = [op(0, "write", "r", "1", "ok", 0.0, 0.1), op(1, "write", "r", "2", "info", 0.2, 0.3),
            op(2, "read", "r", "1", "ok", 0.4, 0.5), op(2, "read", "r", "2", "ok", 0.6, 0.7)]
    expect("register: an unknown write applied late", lin(late), True)
    # ... but not before it was invoked.
    early = [op(0, "write", "r", "1", "ok", 0.0, 0.1), op(2, "read", "r", "2", "ok", 0.2, 0.3),
             op(1, "write", "r", "2", "info", 0.4, 0.5)]
    expect("register: a read of a write not yet invoked", lin(early), False)
    # A failed cas takes no effect; a cas of unknown outcome may or may not.
    cas = [op(0, "write", "r", "1", "ok", 0.0, 0.1), op(1, "cas", "r", ("2", "3"), "fail", 0.2,
                                                       0.3),
           op(1, "cas", "r", ("1", "4"), "info", 0.4, 0.5), op(2, "read", "r", "1", "ok", 0.6, 0.7),
           op(2, "read", "r", "4", "ok", 0.8, 0.9)]
    expect("register: failed and unknown cas", lin(cas), True)
    bad_cas = [op(0, "write", "r", "1", "ok", 0.0, 0.1),
               op(1, "cas", "r", ("2", "3"), "ok", 0.2, 0.3)]
    expect("register: a cas that succeeded against another value", lin(bad_cas), False)
    # Random linearizable histories (each operation takes effect at a random instant inside
    # its interval) pass; turning one read into a stale one that no order allows fails.
    rng = random.Random(7)
    for trial in range(200):
        ops, state, t = [], None, 0.0
        points = []
        for i in range(12):
            start = rng.uniform(0, 10)
            end = start + rng.uniform(0.01, 2)
            points.append((rng.uniform(start, end), start, end, i))
        points.sort()
        for at, start, end, i in points:
            f = rng.choice(["read", "write", "cas"])
            if f == "read":
                ops.append(op(i % 4, "read", "r", state, "ok", start, end))
            elif f == "write":
                state = str(i)
                ops.append(op(i % 4, "write", "r", state, "ok", start, end))
            else:
                old = rng.choice([state, "x"])
                if old == state:
                    ops.append(op(i % 4, "cas", "r", (old, str(i)), "ok", start, end))
                    state = str(i)
                else:
                    ops.append(op(i % 4, "cas", "r", (old, str(i)), "fail", start, end))
        result = lin(ops)
        checks += 2
        if result["valid"] is not True:
            failures.append("register: random linearizable history %d judged %r: %s"
                            % (trial, result["valid"], result["anomalies"]))
            break
        # A read, after everything, of a value no operation ever wrote.
        ops.append(op(9, "read", "r", "never", "ok", 20.0, 21.0))
        if lin(ops)["valid"] is not False:
            failures.append("register: random history %d with a planted read passed" % trial)
            break
    # Keys are checked apart: an anomaly on one is named with its key.
    two = seq + [op(5, "write", "q", "1", "ok", 0, 0.1), op(5, "read", "q", None, "ok", 0.2, 0.3)]
    r = lin(two)
    expect("register: two keys, one anomalous", r, False)
    if not any("key q" in a for a in r["anomalies"]):
        failures.append("register: the anomaly does not name key q: %s" % r["anomalies"])


unique()
counter()
grow_set()
registers()
for f in failures:
    print("FAIL", f)
print("%d passed, %d failed" % (checks - len(failures), len(failures)))
sys.exit(1 if failures else 0)
