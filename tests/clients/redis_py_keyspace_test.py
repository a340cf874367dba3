#!/usr/bin/python3
"""One keyspace through a real Redis client (redis-py, Debian's python3-redis), against
redis-server and grid-node's RESP port side by side (issue 19 part 3): SCAN, KEYS, DBSIZE,
TYPE, EXISTS, DEL, EXPIRE/TTL/PERSIST, RENAME over strings, small and large hashes and
streams, and WRONGTYPE where Redis answers it; the replies compared. Then what only Tessera
has: a large hash's fields are not keys, and RENAME across partitions is CROSSSLOT.
Exits 1 naming every difference.

Usage: redis_py_keyspace_test.py --grid-node PATH
"""
import redis

from side_by_side import check, outcome, run


def sequence(port):
    r = redis.Redis(port=port, single_connection_client=True, socket_timeout=10,
                    decode_responses=True)
    r.flushdb()
    steps = []

    def step(name, fn):
        steps.append((name, outcome(fn)))

    r.set("{k}s", "v")
    r.hset("{k}h", mapping={"f": "1", "g": "2"})
    r.hset("{k}big", mapping={f"f{i}": f"v{i}" for i in range(200)})
    r.xadd("{k}x", {"a": "1"}, id="1-0")
    step("DBSIZE", r.dbsize)
    step("KEYS *", lambda: sorted(r.keys("*")))
    step("SCAN over every kind", lambda: sorted(r.scan_iter(count=3)))
    step("SCAN TYPE hash", lambda: sorted(r.scan_iter(_type="hash")))
    step("SCAN TYPE string", lambda: sorted(r.scan_iter(_type="string")))
    step("SCAN TYPE stream", lambda: sorted(r.scan_iter(_type="stream")))
    for key in ("{k}s", "{k}h", "{k}big", "{k}x", "{k}none"):
        step(f"TYPE {key}", lambda key=key: r.type(key))
    step("EXISTS of every kind", lambda: r.exists("{k}s", "{k}h", "{k}big", "{k}x", "{k}none"))
    step("GET of a hash", lambda: r.get("{k}h"))
    step("INCR of a hash", lambda: r.incr("{k}big"))
    step("HSET of a string", lambda: r.hset("{k}s", "f", "v"))
    step("HGETALL of a string", lambda: r.hgetall("{k}s"))
    step("GET of a large hash", lambda: r.get("{k}big"))
    step("GET of a stream", lambda: r.get("{k}x"))
    step("HGET of a stream", lambda: r.hget("{k}x", "a"))
    step("EXPIRE a stream", lambda: r.expire("{k}x", 50))
    step("TTL of a stream", lambda: r.ttl("{k}x"))
    step("PERSIST a stream", lambda: r.persist("{k}x"))
    step("MGET over kinds", lambda: r.mget("{k}s", "{k}h", "{k}none"))
    step("HLEN of a large hash", lambda: r.hlen("{k}big"))
    step("HGETALL of a large hash", lambda: r.hgetall("{k}big"))
    step("HDEL and HLEN", lambda: (r.hdel("{k}big", "f1", "f2", "zz"), r.hlen("{k}big")))
    step("EXPIRE a hash", lambda: r.expire("{k}h", 100))
    step("TTL of a hash", lambda: r.ttl("{k}h"))
    step("PERSIST a hash", lambda: r.persist("{k}h"))
    step("TTL after PERSIST", lambda: r.ttl("{k}h"))
    step("RENAME a small hash", lambda: r.rename("{k}h", "{k}h2"))
    step("HGETALL after RENAME", lambda: r.hgetall("{k}h2"))
    step("RENAME a large hash", lambda: r.rename("{k}big", "{k}big2"))
    step("HLEN after RENAME", lambda: r.hlen("{k}big2"))
    step("RENAMENX onto an existing key", lambda: r.renamenx("{k}s", "{k}h2"))
    step("RENAME a missing key", lambda: r.rename("{k}none", "{k}n2"))
    step("SET over a hash", lambda: r.set("{k}h2", "str"))
    step("TYPE after SET", lambda: r.type("{k}h2"))
    step("DEL of every kind", lambda: r.delete("{k}s", "{k}h2", "{k}big2", "{k}x", "{k}none"))
    step("DBSIZE after DEL", r.dbsize)
    step("HSET on a deleted large hash starts afresh", lambda: r.hset("{k}big2", "a", "1"))
    step("HGETALL of it", lambda: r.hgetall("{k}big2"))
    r.xadd("{k}y", {"a": "1"}, id="1-0")
    step("SET over a stream", lambda: r.set("{k}y", "str"))
    step("TYPE after SET over a stream", lambda: r.type("{k}y"))
    step("XLEN of that string", lambda: r.xlen("{k}y"))
    step("XRANGE of a string", lambda: r.xrange("{k}y"))
    step("XGROUP CREATE MKSTREAM on a string", lambda: r.xgroup_create("{k}y", "g", mkstream=True))
    step("XINFO STREAM of a string", lambda: r.xinfo_stream("{k}y"))
    step("XADD NOMKSTREAM on a string", lambda: r.xadd("{k}y", {"a": "1"}, nomkstream=True))
    step("XREAD of a string", lambda: r.xread({"{k}y": "0"}))
    step("XREADGROUP of a string", lambda: r.xreadgroup("g", "c", {"{k}y": ">"}))
    step("GET after them", lambda: r.get("{k}y"))
    step("XADD after it", lambda: r.xadd("{k}z", {"b": "2"}, id="5-0"))
    step("DBSIZE at the end", r.dbsize)
    r.close()
    return steps


def tessera_only(port):
    r = redis.Redis(port=port, socket_timeout=10, decode_responses=True)
    r.flushdb()
    r.hset("big", mapping={f"f{i}": "v" for i in range(300)})
    check(r.dbsize() == 1 and r.keys("*") == ["big"],
          "a large hash's fields are not keys of the keyspace")
    try:
        r.rename("{a}k", "{b}k") if r.set("{a}k", "1") else None
        check(False, "RENAME across partitions is refused")
    except redis.ResponseError as e:
        check(str(e).startswith("CROSSSLOT"), f"RENAME across partitions is CROSSSLOT: {e}")
    check(r.get("{a}k") == "1", "and the key stays where it was")
    r.xadd("st", {"a": "1"})
    r.set("st", "v")
    r.delete("st")
    check(r.xadd("st", {"b": "2"}, id="1-0") == "1-0" and r.xlen("st") == 1,
          "a stream made again after SET and DEL starts afresh (IDs from 1-0, one entry)")
    r.close()


if __name__ == "__main__":
    run(sequence, tessera_only)
