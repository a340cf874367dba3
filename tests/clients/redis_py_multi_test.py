#!/usr/bin/python3
"""MULTI/EXEC/DISCARD through a real Redis client (redis-py, Debian's python3-redis), against
redis-server and grid-node's RESP port side by side: the same sequence on both, the replies
compared (issue 19). Then what only Tessera has: CROSSSLOT for keys of two partitions and an
all-or-nothing block, each with nothing applied. Exits 1 naming every difference.

Usage: redis_py_multi_test.py --grid-node PATH
"""
import redis

from side_by_side import check, outcome, run


def sequence(port):
    """The steps both servers must answer alike; a fresh single connection."""
    r = redis.Redis(port=port, single_connection_client=True, socket_timeout=10)
    r.flushdb()
    # For commands sent one at a time inside MULTI: replies as the server sent them (redis-py
    # would parse a QUEUED as the command's own reply type).
    raw = redis.Redis(port=port, single_connection_client=True, socket_timeout=10)
    raw.response_callbacks.clear()
    steps = []

    def step(name, fn):
        steps.append((name, outcome(fn)))

    # redis-py's transactional pipeline: MULTI, the commands and EXEC in one write.
    p = r.pipeline(transaction=True)
    p.set("{t}:t1", "x").incr("{t}:t2").get("{t}:t1").expire("{t}:t2", 100).delete("{t}:none")
    step("pipeline(transaction=True) of set, incr, get, expire, delete", p.execute)
    step("GET after EXEC", lambda: r.get("{t}:t1"))
    step("TTL after EXEC", lambda: r.ttl("{t}:t2"))
    # By hand, one command at a time.
    step("MULTI", lambda: raw.execute_command("MULTI"))
    step("SET queued", lambda: raw.execute_command("SET", "{t}:a", "1"))
    step("MULTI inside MULTI", lambda: raw.execute_command("MULTI"))
    step("INCRBY with a bad argument, queued", lambda: raw.execute_command("INCRBY", "{t}:b", "x"))
    step("SET NX on an existing key, queued", lambda: raw.execute_command("SET", "{t}:t1", "y", "NX"))
    step("EXEC", lambda: raw.execute_command("EXEC"))
    step("GET {t}:a", lambda: raw.get("{t}:a"))
    # A queueing error aborts the block.
    step("MULTI (2)", lambda: raw.execute_command("MULTI"))
    step("SET queued (2)", lambda: raw.execute_command("SET", "{t}:c", "1"))
    step("unknown command inside MULTI", lambda: raw.execute_command("NOSUCHCMD", "x"))
    step("EXEC after a queueing error", lambda: raw.execute_command("EXEC"))
    step("GET {t}:c: nothing applied", lambda: raw.get("{t}:c"))
    step("MULTI (3)", lambda: raw.execute_command("MULTI"))
    step("wrong arity inside MULTI", lambda: raw.execute_command("GET"))
    step("EXEC after a wrong arity", lambda: raw.execute_command("EXEC"))
    # DISCARD, and the errors without MULTI.
    step("MULTI (4)", lambda: raw.execute_command("MULTI"))
    step("SET queued (4)", lambda: raw.execute_command("SET", "{t}:d", "1"))
    step("DISCARD", lambda: raw.execute_command("DISCARD"))
    step("GET {t}:d: discarded", lambda: raw.get("{t}:d"))
    step("EXEC without MULTI", lambda: raw.execute_command("EXEC"))
    step("DISCARD without MULTI", lambda: raw.execute_command("DISCARD"))
    step("empty block", lambda: r.pipeline(transaction=True).execute())
    # WATCH: another client's write between WATCH and EXEC makes EXEC answer nil.
    other = redis.Redis(port=port, socket_timeout=10)
    step("WATCH", lambda: raw.execute_command("WATCH", "{t}:w"))
    step("another client writes the watched key", lambda: other.set("{t}:w", "1"))
    step("MULTI (5)", lambda: raw.execute_command("MULTI"))
    step("SET queued (5)", lambda: raw.execute_command("SET", "{t}:w", "2"))
    step("EXEC after the watched key changed", lambda: raw.execute_command("EXEC"))
    step("GET {t}:w: the other client's value", lambda: raw.get("{t}:w"))
    step("WATCH inside MULTI", lambda: (raw.execute_command("MULTI"),
                                        raw.execute_command("WATCH", "{t}:w")))
    step("EXEC of that block", lambda: raw.execute_command("EXEC"))

    def optimistic(change):
        """redis-py's check-and-set: WATCH, read, MULTI, write, EXEC (WatchError if changed)."""
        with r.pipeline() as p:
            p.watch("{t}:cas")
            current = int(p.get("{t}:cas") or 0)
            if change:
                other.set("{t}:cas", "100")
            p.multi()
            p.set("{t}:cas", current + 1)
            return p.execute()

    step("check-and-set, unchanged", lambda: optimistic(False))
    step("check-and-set, changed meanwhile", lambda: optimistic(True))
    step("GET {t}:cas", lambda: r.get("{t}:cas"))
    other.close()
    r.close()
    raw.close()
    return steps


def tessera_only(resp_port):
    # Only Tessera: one partition per block, all or nothing.
    r = redis.Redis(port=resp_port, single_connection_client=True, socket_timeout=10)
    a, b = "plain-a", None
    partition_of = {}
    for i in range(200):  # two keys whose partitions differ (no hash tag)
        key = f"plain-{i}"
        r.execute_command("MULTI")
        r.execute_command("SET", a, "1")
        try:
            r.execute_command("SET", key, "1")
            r.execute_command("DISCARD")
        except redis.ResponseError as e:
            partition_of[key] = str(e)
            r.execute_command("DISCARD")
            b = key
            break
    check(b is not None and partition_of[b].startswith("CROSSSLOT"),
          f"a key of another partition in a block is refused with CROSSSLOT: {partition_of}")
    p = r.pipeline(transaction=True)
    p.set(a, "1").set(b, "2")
    try:
        p.execute()
        check(False, "a pipeline over two partitions fails")
    except redis.ResponseError as e:
        check("EXECABORT" in str(e) or "CROSSSLOT" in str(e),
              f"a pipeline over two partitions fails with CROSSSLOT/EXECABORT: {e}")
    check(r.get(a) is None and r.get(b) is None,
          "nothing of the cross-partition pipeline was applied")
    r.set("{n}:s", "not-a-number")
    p = r.pipeline(transaction=True)
    p.set("{n}:n", "5").incr("{n}:s")
    try:
        p.execute()
        check(False, "a block whose INCR fails at run time fails as a whole")
    except redis.ResponseError as e:
        check("nothing was applied" in str(e),
              f"a block whose INCR fails at run time fails as a whole: {e}")
    check(r.get("{n}:n") is None, "nothing of the failed block was applied")
    r.close()


if __name__ == "__main__":
    run(sequence, tessera_only)
