"""Durability probe: append messages and print each acknowledged one.

    python -m broker.store.probe --store DIR [--flush sync|async] [--count N]

Every acknowledged append prints ``ack TOPIC QUEUE OFFSET SHA1 KEY`` on stdout
(flushed at once), so a parent that ``kill -9``s this process at any moment
knows exactly what the store promised. With ``--flush sync`` a line is
printed only after the group commit made the message durable. Messages go
to 4 queues singly, in batches of 1-20 and in groups of 2-16 single messages
to random queues (``put_group_nowait``, the broker's path for concurrent
single sends), bodies of 1-3000 random bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import time

from broker.store.config import FlushDiskType, StoreConfig
from broker.store.inner import BatchInner, MessageInner
from broker.store.store import MessageStore
from connector.protocol.message import Message

TOPIC = "ProbeTopic"
QUEUES = 4


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m broker.store.probe", description=__doc__)
    ap.add_argument("--store", required=True)
    ap.add_argument("--flush", choices=["sync", "async"], default="sync")
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--segment-size", type=int, default=256 * 1024)
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed if args.seed is not None else os.getpid() ^ time.time_ns())
    config = StoreConfig(
        store_dir=args.store,
        mapped_file_size_commit_log=args.segment_size,
        consume_queue_entries_per_file=500,
        flush_disk_type=FlushDiskType.SYNC_FLUSH
        if args.flush == "sync"
        else FlushDiskType.ASYNC_FLUSH,
        flush_interval_consume_queue_ms=50,
        max_hash_slot_num=1024,
        max_index_num=20_000,
    )
    store = MessageStore(config)
    report = store.start()
    print(f"ready {report.abnormal} {report.truncated_at}", flush=True)
    out = sys.stdout
    sent = 0
    run = f"{os.getpid()}-{rng.getrandbits(32):08x}"
    while sent < args.count:
        if rng.random() < 0.25:
            sent += _put_group(store, rng, run, sent, sync=args.flush == "sync")
            continue
        queue_id = rng.randrange(QUEUES)
        n = 1 if rng.random() < 0.5 else rng.randint(1, 20)
        msgs = []
        for i in range(n):
            body = rng.randbytes(rng.randint(1, 3000))
            msgs.append(Message(topic=TOPIC, body=body, keys=[f"{run}-{sent + i}"]))
        now = int(time.time() * 1000)
        if n == 1:
            result = store.put_message(
                MessageInner.from_message(msgs[0], queue_id=queue_id, born_timestamp=now)
            )
        else:
            result = store.put_messages(
                BatchInner.from_messages(msgs, queue_id=queue_id, born_timestamp=now)
            )
        if not result.ok or result.append is None:
            print(f"fail {result.status.value}", flush=True)
            continue
        if args.flush == "sync" and result.status.value != "PUT_OK":
            continue  # not acknowledged as durable
        lines = [
            f"ack {TOPIC} {queue_id} {result.append.queue_offset + i} "
            f"{hashlib.sha1(m.body).hexdigest()} {m.keys[0]}\n"
            for i, m in enumerate(msgs)
        ]
        out.write("".join(lines))
        out.flush()
        sent += n
    store.shutdown()
    print("done", flush=True)
    return 0


def _put_group(store: MessageStore, rng: random.Random, run: str, sent: int, *, sync: bool) -> int:
    """Append 2-16 single messages to random queues as one group; ack them; how many."""
    now = int(time.time() * 1000)
    msgs = [
        MessageInner.from_message(
            Message(topic=TOPIC, body=rng.randbytes(rng.randint(1, 3000)), keys=[f"{run}-{seq}"]),
            queue_id=rng.randrange(QUEUES),
            born_timestamp=now,
        )
        for seq in range(sent, sent + rng.randint(2, 16))
    ]
    results, flushed = store.put_group_nowait(msgs)
    if not all(r.ok and r.append is not None for r in results):
        print(f"fail {[r.status.value for r in results]}", flush=True)
        return 0
    if sync and store.wait_flush(results[0], flushed).status.value != "PUT_OK":
        return len(msgs)  # stored but not acknowledged as durable
    sys.stdout.write(
        "".join(
            f"ack {TOPIC} {m.queue_id} {r.append.queue_offset} "
            f"{hashlib.sha1(m.body).hexdigest()} {m.keys[0]}\n"
            for m, r in zip(msgs, results, strict=True)
            if r.append is not None
        )
    )
    sys.stdout.flush()
    return len(msgs)


if __name__ == "__main__":
    raise SystemExit(main())
