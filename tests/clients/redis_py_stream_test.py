#!/usr/bin/python3
"""Redis streams through a real Redis client (redis-py, Debian's python3-redis), against
redis-server and grid-node's RESP port side by side: XADD, XRANGE, XREAD (BLOCK), consumer
groups with XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO, the same sequence on both
and the replies compared (issue 19). Times that differ by nature (idle times, auto IDs) are
left out of the comparison. Then what only Tessera does: trimming stops at entries a group
still owes. Exits 1 naming every difference.

Usage: redis_py_stream_test.py --grid-node PATH
"""
import threading
import time

import redis

from side_by_side import check, outcome, run

# Fields of XINFO replies that measure time or Redis's radix tree, not the stream's contents.
UNSTABLE = {"idle", "inactive", "seen-time", "active-time", "radix-tree-keys",
            "radix-tree-nodes", "time_since_delivered"}


def stable(reply):
    if isinstance(reply, dict):
        return {k: stable(v) for k, v in reply.items() if k not in UNSTABLE}
    if isinstance(reply, list):
        return [stable(x) for x in reply]
    if isinstance(reply, tuple):
        return tuple(stable(x) for x in reply)
    return reply


def sequence(port):
    r = redis.Redis(port=port, single_connection_client=True, socket_timeout=10,
                    decode_responses=True)
    steps = []

    def step(name, fn):
        steps.append((name, stable(outcome(fn))))

    s = "orders"
    step("XADD 1-1", lambda: r.xadd(s, {"item": "book", "qty": "1"}, id="1-1"))
    step("XADD the same ID", lambda: r.xadd(s, {"item": "pen"}, id="1-1"))
    step("XADD 0-0", lambda: r.xadd(s, {"item": "pen"}, id="0-0"))
    step("XADD 1-*", lambda: r.xadd(s, {"item": "pen"}, id="1-*"))
    step("XADD 2 (no sequence)", lambda: r.xadd(s, {"item": "ink"}, id="2"))
    for i in range(3, 8):
        step(f"XADD {i}-0", lambda i=i: r.xadd(s, {"n": str(i)}, id=f"{i}-0"))
    step("XADD * gives an ID", lambda: "-" in r.xadd(s, {"n": "auto"}))
    step("XADD NOMKSTREAM on a missing key", lambda: r.xadd("none", {"a": "1"}, nomkstream=True))
    step("XLEN", lambda: r.xlen(s))
    step("XLEN of a missing key", lambda: r.xlen("none"))
    step("XRANGE - + COUNT 3", lambda: r.xrange(s, "-", "+", count=3))
    step("XRANGE (2-0 5", lambda: r.xrange(s, "(2-0", "5"))
    step("XREVRANGE 6 (3-0", lambda: r.xrevrange(s, "6", "(3-0"))
    step("XRANGE bad ID", lambda: r.xrange(s, "x", "+"))
    step("XREAD COUNT 2 after 4-0", lambda: r.xread({s: "4-0"}, count=2))
    step("XREAD of two streams", lambda: r.xread({s: "6-0", "none": "0"}, count=1))
    step("XREAD $ BLOCK 50: nothing new", lambda: r.xread({s: "$"}, block=50))

    t = "jobs"
    step("XGROUP CREATE on a missing key", lambda: r.xgroup_create(t, "workers", id="$"))
    step("XGROUP CREATE MKSTREAM", lambda: r.xgroup_create(t, "workers", id="$", mkstream=True))
    step("XGROUP CREATE again", lambda: r.xgroup_create(t, "workers", id="0"))
    for i in range(1, 6):
        step(f"XADD jobs {i}-0", lambda i=i: r.xadd(t, {"job": str(i)}, id=f"{i}-0"))
    step("XGROUP CREATE at 0 (second group)", lambda: r.xgroup_create(t, "audit", id="0"))
    step("XGROUP CREATECONSUMER", lambda: r.xgroup_createconsumer(t, "workers", "carol"))
    step("XGROUP CREATECONSUMER again", lambda: r.xgroup_createconsumer(t, "workers", "carol"))
    step("XREADGROUP alice COUNT 2",
         lambda: r.xreadgroup("workers", "alice", {t: ">"}, count=2))
    step("XREADGROUP bob", lambda: r.xreadgroup("workers", "bob", {t: ">"}, count=2))
    step("XREADGROUP NOACK dave", lambda: r.xreadgroup("workers", "dave", {t: ">"}, noack=True))
    step("XREADGROUP when nothing is new", lambda: r.xreadgroup("workers", "bob", {t: ">"}))
    step("XREADGROUP of a missing group", lambda: r.xreadgroup("nope", "x", {t: ">"}))
    step("XPENDING summary", lambda: r.xpending(t, "workers"))
    step("XACK one known, one unknown", lambda: r.xack(t, "workers", "1-0", "9-0"))
    step("XACK of a missing group", lambda: r.xack(t, "nope", "2-0"))
    step("XREADGROUP alice's history", lambda: r.xreadgroup("workers", "alice", {t: "0"}))
    step("XPENDING range", lambda: r.xpending_range(t, "workers", "-", "+", 10))
    step("XPENDING range of bob", lambda: r.xpending_range(t, "workers", "-", "+", 10, "bob"))
    step("XCLAIM not idle enough", lambda: r.xclaim(t, "workers", "carol", 60000, ["2-0"]))
    step("XCLAIM", lambda: r.xclaim(t, "workers", "carol", 0, ["2-0", "8-0"]))
    step("XCLAIM JUSTID", lambda: r.xclaim(t, "workers", "carol", 0, ["3-0"], justid=True))
    step("XAUTOCLAIM COUNT 1",
         lambda: r.xautoclaim(t, "workers", "erin", 0, start_id="0-0", count=1))
    step("XAUTOCLAIM JUSTID rest",
         lambda: r.xautoclaim(t, "workers", "erin", 0, start_id="3-0", justid=True))
    step("XPENDING summary after claims", lambda: r.xpending(t, "workers"))
    step("XINFO GROUPS", lambda: r.xinfo_groups(t))
    step("XINFO CONSUMERS", lambda: r.xinfo_consumers(t, "workers"))
    step("XINFO STREAM", lambda: r.xinfo_stream(t))
    step("XINFO STREAM of a missing key", lambda: r.xinfo_stream("none"))
    step("XGROUP DELCONSUMER erin", lambda: r.xgroup_delconsumer(t, "workers", "erin"))
    step("XPENDING after DELCONSUMER", lambda: r.xpending(t, "workers"))
    step("XGROUP DESTROY", lambda: r.xgroup_destroy(t, "audit"))
    step("XGROUP DESTROY again", lambda: r.xgroup_destroy(t, "audit"))
    step("TYPE of a stream", lambda: r.type(t))
    step("EXISTS of a stream and a missing key", lambda: r.exists(t, "none"))
    step("DEL of a stream", lambda: r.delete(t))
    step("after DEL: EXISTS, XLEN, XINFO GROUPS",
         lambda: (r.exists(t), r.xlen(t), outcome(lambda: r.xinfo_groups(t))))
    step("XADD 1-0 on the deleted key starts afresh", lambda: r.xadd(t, {"a": "1"}, id="1-0"))
    step("XTRIM MAXLEN = 2 without groups",
         lambda: (r.xtrim(s, maxlen=2, approximate=False), r.xlen(s), r.xrange(s, count=1)))
    step("XTRIM MINID", lambda: (r.xtrim(s, minid="9999999999999", approximate=False),
                                 r.xlen(s)))

    # BLOCK: a read that waits for another client's XADD.
    other = redis.Redis(port=port, socket_timeout=10, decode_responses=True)
    r.xgroup_create("live", "g", id="$", mkstream=True)
    writer = threading.Timer(0.2, lambda: other.xadd("live", {"k": "v"}, id="1-0"))
    writer.start()
    step("XREADGROUP BLOCK 5000 gets the entry written meanwhile",
         lambda: r.xreadgroup("g", "c", {"live": ">"}, block=5000))
    writer.join()
    writer = threading.Timer(0.2, lambda: other.xadd("live", {"k": "w"}, id="2-0"))
    writer.start()
    step("XREAD BLOCK 5000 $ gets the entry written meanwhile",
         lambda: r.xread({"live": "$"}, block=5000))
    writer.join()
    other.close()
    r.close()
    return steps


def tessera_only(port):
    r = redis.Redis(port=port, single_connection_client=True, socket_timeout=10,
                    decode_responses=True)
    r.xgroup_create("held", "g", id="$", mkstream=True)
    for i in range(1, 6):
        r.xadd("held", {"n": str(i)}, id=f"{i}-0")
    r.xreadgroup("g", "c", {"held": ">"}, count=2)
    r.xack("held", "g", "1-0")
    trimmed = r.xtrim("held", maxlen=0, approximate=False)
    check(trimmed == 1 and r.xrange("held", count=1)[0][0] == "2-0",
          f"MAXLEN 0 removes only what every group acknowledged (removed {trimmed})")
    start = time.monotonic()
    check(not r.xread({"held": "$"}, block=300) and time.monotonic() - start >= 0.29,
          "XREAD BLOCK 300 with nothing new answers nil after 300 ms")
    check(r.set("x", "1") and r.get("x") == "1", "the member serves string commands meanwhile")
    try:
        r.xadd("bad@key", {"a": "1"})
        check(False, "a stream key with '@' is refused")
    except redis.ResponseError as e:
        check("'@'" in str(e), f"a stream key with '@' is refused naming the problem: {e}")
    r.close()


if __name__ == "__main__":
    run(sequence, tessera_only)
