"""A SYNC_FLUSH broker process killed with SIGKILL, then stopped with SIGTERM, on one store."""

from __future__ import annotations

import hashlib
import random

from tests.support.processes import Servers
from tests.support.rest import create_topic, health, pull_all_records, send, send_batch

TOPIC = "Durable"
QUEUES = 4
# (sha256 of the body, commit-log offset) per queue offset, per queue
Expected = dict[int, list[tuple[str, int]]]


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def offset_of(offset_msg_id: str) -> int:
    return int(offset_msg_id[16:], 16)


def send_mix(
    addr: str,
    rng: random.Random,
    expected: Expected,
    *,
    singles: int,
    batches: int,
    batch_size: int,
) -> int:
    """Interleave JSON single sends and binary batches over every queue; count acknowledged."""
    jobs = ["single"] * singles + ["batch"] * batches
    rng.shuffle(jobs)
    acked = 0
    for job in jobs:
        qid = rng.randrange(QUEUES)
        if job == "single":
            body = rng.randbytes(rng.randrange(1, 700))
            r = send(addr, TOPIC, body, queue_id=qid)
            assert r["queue_offset"] == len(expected[qid])
            expected[qid].append((digest(body), offset_of(r["offset_msg_id"])))
            acked += 1
        else:
            bodies = [rng.randbytes(rng.randrange(1, 700)) for _ in range(batch_size)]
            r = send_batch(addr, TOPIC, bodies, queue_id=qid)
            assert r["queue_offset"] == len(expected[qid])
            expected[qid] += zip(map(digest, bodies), r["commit_log_offsets"], strict=True)
            acked += batch_size
    return acked


def assert_served(addr: str, expected: Expected) -> None:
    """Every acknowledged message, byte for byte, at its offset; offsets contiguous from 0."""
    for qid in range(QUEUES):
        msgs = pull_all_records(addr, TOPIC, qid)
        assert [m.queue_offset for m in msgs] == list(range(len(msgs))), qid
        got = [(digest(m.body), m.commit_log_offset) for m in msgs]
        assert got == expected[qid], f"queue {qid}: {len(got)} served, {len(expected[qid])} acked"
        assert all(m.topic == TOPIC and m.queue_id == qid for m in msgs)


def test_acknowledged_messages_survive_kill_and_clean_restart(servers: Servers) -> None:
    # small segments: the 2,000 messages span many CommitLog files
    args = ["--flush", "sync", "--segment-size", "65536"]
    proc = servers.broker(args=args)
    assert "SYNC_FLUSH" in proc.ready_line
    store = servers.root / "broker-a"
    create_topic(
        proc.http_addr, TOPIC, {"read_queue_nums": QUEUES, "write_queue_nums": QUEUES, "perm": 6}
    )
    assert health(proc.http_addr)["recovery"] == {"abnormal": False}  # a fresh store

    rng = random.Random(20240601)
    expected: Expected = {q: [] for q in range(QUEUES)}
    acked = send_mix(proc.http_addr, rng, expected, singles=200, batches=36, batch_size=50)
    assert acked == 2000
    assert sum(len(v) for v in expected.values()) == 2000
    assert len(list((store / "commitlog").iterdir())) > 5

    proc.kill()
    assert (store / "abort").exists()  # nobody removed it: the next start is abnormal
    proc = servers.restart(proc, crash=True)
    assert health(proc.http_addr)["recovery"] == {"abnormal": True}
    assert_served(proc.http_addr, expected)

    # the recovered broker appends after what it recovered
    send_mix(proc.http_addr, rng, expected, singles=20, batches=4, batch_size=25)
    assert_served(proc.http_addr, expected)

    code = proc.terminate()
    assert code == 0, proc.last_log_line()
    assert not (store / "abort").exists()
    proc = servers.restart(proc)
    assert health(proc.http_addr)["recovery"] == {"abnormal": False}
    assert_served(proc.http_addr, expected)
