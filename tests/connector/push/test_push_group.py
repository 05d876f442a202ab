"""Push consumers in processes of their own: a group losing a member to kill -9,
orderly consumption across a member's kill -9, broadcasting with a restart."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from connector import Admin
from connector.local import LocalCluster
from tests.support.cluster import create_topic
from tests.support.push import Member, produce
from tests.support.waits import wait_until

FAST = {
    "consume_from_where": "CONSUME_FROM_FIRST_OFFSET",
    "persist_consumer_offset_interval_ms": 500,
    "rebalance_interval_ms": 2000,
}


def settled(members: list[Member], topic_queues: int) -> Callable[[], bool]:
    """Every member's last report together: each queue owned once, by members that
    all rebalanced (each holds its even share; a member that has not yet seen the
    others would still hold them all)."""

    def check() -> bool:
        owned = [q for m in members for q in m.owned]
        loads = [len(m.owned) for m in members]
        balanced = min(loads) >= 1 and max(loads) - min(loads) <= 1
        return balanced and len(owned) == topic_queues and len(set(owned)) == topic_queues

    return check


def test_a_group_loses_a_member_to_kill_9(
    cluster: LocalCluster, members: Callable[..., Member]
) -> None:
    topic, group = "PushGroupKill", "push-group-kill"
    create_topic(cluster, topic, queues=4)  # 8 queues on 2 brokers
    params: dict[str, Any] = {
        "namesrv": cluster.namesrv_addr, "group": group, "topic": topic,
        "settings": FAST, "consume_delay_s": 0.002,
    }  # fmt: skip
    group_members = [members(**params) for _ in range(3)]
    wait_until(settled(group_members, 8), 60.0, what="3 members splitting 8 queues")
    first = [f"a{i}" for i in range(1500)]
    produce(cluster, topic, first)
    victim, survivors = group_members[0], group_members[1:]
    wait_until(lambda: len(victim.bodies) >= 100, 60.0, what="the victim mid-stream")
    killed_at = time.time()
    victim.kill()
    wait_until(
        lambda: set(first) <= set(victim.bodies) | {b for m in survivors for b in m.bodies},
        60.0,
        what="every message consumed",
    )
    wait_until(settled(survivors, 8), 60.0, what="2 survivors splitting 8 queues")
    # the survivors re-read what the victim had consumed but not committed: done once the
    # group's committed offsets reach every queue's end (else those re-reads would land
    # after `before` below and look like a settled group consuming twice)
    with Admin(namesrv=cluster.namesrv_addr) as admin:

        def committed_to_the_end() -> bool:
            rows = [r for r in admin.consumer_progress(group) if r["topic"] == topic]
            return len(rows) == 8 and all(r["lag"] == 0 for r in rows)

        wait_until(committed_to_the_end, 60.0, what="the group's offsets at every queue's end")
    consumed = sorted((e["t"], e["body"]) for m in (victim, *survivors) for e in m.of("msg"))
    first_time: dict[str, float] = {}
    dups = set()
    for t, body in consumed:
        if body in first_time:
            dups.add(body)
        else:
            first_time[body] = t
    # re-delivered: only what was consumed but not yet committed when the victim died
    # (offsets persist every 0.5 s; 2.5 s more for a loaded machine), or what a survivor
    # consumed of a queue the rebalance moved before its new owner read the commit
    assert all(first_time[b] >= killed_at - 3.0 for b in dups), sorted(
        killed_at - first_time[b] for b in dups
    )[-5:]
    # once settled: no queue owned twice, nothing consumed twice
    before = {id(m): len(m.bodies) for m in survivors}
    second = [f"b{i}" for i in range(400)]
    produce(cluster, topic, second)
    wait_until(
        lambda: set(second) <= {b for m in survivors for b in m.bodies},
        60.0,
        what="the second batch",
    )
    later = collections.Counter(b for m in survivors for b in m.bodies[before[id(m)] :])
    assert sorted(later) == sorted(second) and max(later.values()) == 1
    print(f"kill -9 of 1 of 3: {len(dups)} of {len(first)} message(s) consumed twice")


def test_orderly_keeps_each_keys_order_across_a_kill_9(
    cluster: LocalCluster, members: Callable[..., Member]
) -> None:
    topic, group = "PushOrderly", "push-orderly"
    create_topic(cluster, topic, queues=2)  # 4 queues
    params: dict[str, Any] = {
        "namesrv": cluster.namesrv_addr, "group": group, "topic": topic, "orderly": True,
        "consume_delay_s": 0.003,
        # the broker frees a lock after 5 s here: renew well within, trust it less long
        "settings": {**FAST, "lock_renew_interval_ms": 1000, "lock_lost_after_ms": 3000},
    }  # fmt: skip
    a, b = members(**params), members(**params)
    wait_until(settled([a, b], 4), 60.0, what="2 members splitting 4 queues")
    keys = [f"k{i}" for i in range(8)]
    bodies = [f"{k}:{n}" for n in range(100) for k in keys]
    # half before the kill, half after: whatever the speed of the listener, every key
    # has messages left for the survivor once ``a`` is gone
    produce(cluster, topic, bodies[:400], key=lambda body: body.split(":")[0])
    wait_until(lambda: len(a.bodies) >= 50, 60.0, what="a mid-stream")
    a.kill()
    produce(cluster, topic, bodies[400:], key=lambda body: body.split(":")[0])
    wait_until(
        lambda: set(bodies) <= set(a.bodies) | set(b.bodies), 60.0, what="every message consumed"
    )
    for member in (a, b):  # within a member, each key's sequence only rises
        last: dict[str, int] = {}
        for body in member.bodies:
            k, n = body.split(":")
            assert int(n) > last.get(k, -1), f"{body} after {k}:{last[k]}"
            last[k] = int(n)
    # the survivor read each key it took over from a committed point: what it got of a
    # key the victim had is a contiguous run to the end
    for k in keys:
        got = sorted(int(x.split(":")[1]) for x in b.bodies if x.startswith(f"{k}:"))
        assert got == list(range(got[0], 100)), [
            (name, e["queue"], e["body"])
            for name, m in (("a", a), ("b", b))
            for e in m.of("msg")
            if e["body"].startswith(f"{k}:")
        ]


def test_broadcasting_gives_everything_to_each_member_across_a_restart(
    cluster: LocalCluster, members: Callable[..., Member], tmp_path: Path
) -> None:
    topic, group = "PushBroadcast", "push-broadcast"
    create_topic(cluster, topic, queues=2)
    params: dict[str, Any] = {
        "namesrv": cluster.namesrv_addr, "group": group, "topic": topic,
        "settings": {**FAST, "message_model": "BROADCASTING"},
        "offset_store_dir": str(tmp_path / "offsets"),
    }  # fmt: skip
    one = members(**params, instance_name="one")
    two = members(**params, instance_name="two")
    wait_until(
        lambda: len(one.owned) == len(two.owned) == 4, 60.0, what="both members on every queue"
    )
    first = [f"a{i}" for i in range(200)]
    produce(cluster, topic, first)
    wait_until(
        lambda: set(first) <= set(one.bodies) & set(two.bodies),
        60.0,
        what="both got the first batch",
    )
    two.stop()
    assert two.of("stopped")
    assert list((tmp_path / "offsets").glob("*two/push-broadcast/offsets.json"))
    second = [f"b{i}" for i in range(200)]
    produce(cluster, topic, second)
    again = members(**params, instance_name="two")
    deadline = time.monotonic() + 60
    wait_until(
        lambda: set(second) <= set(again.bodies),
        60.0,
        what="the restarted member got the second batch",
    )
    assert time.monotonic() < deadline
    wait_until(lambda: set(second) <= set(one.bodies), 60.0, what="the other member too")
    assert not set(first) & set(again.bodies)  # it went on from its offset file
    assert sorted(one.bodies) == sorted(first + second)
