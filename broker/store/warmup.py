"""Load the compiled kernels before the first request needs them.

numba loads each kernel from its on-disk cache on first call, which takes
about a second in all; without this the first batch send or pull after a
broker starts is that much slower. A throwaway store in a temp dir runs
every path once (append single, group and batch, read, index lookup,
recovery).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path

from broker.store.config import StoreConfig
from broker.store.inner import BatchInner, MessageInner
from broker.store.store import MessageStore
from connector.protocol.message import Message

__all__ = ["warm_up_kernels"]

log = logging.getLogger(__name__)


def warm_up_kernels() -> float:
    """Run every store kernel once on a scratch store; the seconds it took."""
    t0 = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix="pymq-warmup-"))
    try:
        config = StoreConfig(
            store_dir=base,
            mapped_file_size_commit_log=1 << 16,
            consume_queue_entries_per_file=64,
            max_hash_slot_num=64,
            max_index_num=256,
        )
        store = MessageStore(config)
        store.start()
        msgs = [Message(topic="WarmUp", body=b"w" * 16, keys=["k"]) for _ in range(4)]
        uniq = ["u1", "u2", "u3", "u4"]
        store.put_messages(
            BatchInner.from_messages(msgs, queue_id=0, born_timestamp=0, uniq_keys=uniq)
        )
        store.put_message(MessageInner.from_message(msgs[0], queue_id=0, born_timestamp=0))
        store.put_group_nowait(
            [MessageInner.from_message(m, queue_id=q, born_timestamp=0) for q, m in enumerate(msgs)]
        )
        store.get_message("WarmUp", 0, 0, 8).bodies()
        store.query_message("WarmUp", "k")
        store.close()  # no clean shutdown: the restart below runs abnormal recovery
        again = MessageStore(config)
        again.start()
        again.shutdown()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    seconds = time.perf_counter() - t0
    log.info("store kernels warmed up in %.2f s", seconds)
    return seconds
