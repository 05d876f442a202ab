"""``deliveryGuarantee=exactly-once``: a micro-batch's rows become visible once,
atomically with Spark's commit of the batch, whatever fails and restarts.

Tasks send each batch request as a transactional *batch half* keyed on
(writer, batch): for a stream the query's id (it survives restarts from the
checkpoint) and the micro-batch id, both from the task's local properties;
for a one-off ``df.write`` an id made for that write and batch 0. Nothing is
readable yet. A task's commit message lists its halves. On the driver,
``commit`` commits the batch's halves with one **batch commit** per broker
(see ``broker/transaction.py``):

1. first on the *coordinator*, the first broker name of the cluster in
   sorted order (it does not depend on where rows went, so a re-run of the
   batch picks the same one), carrying the whole manifest (every broker's
   halves): it only records the decision (``defer``), a single op record;
2. if the coordinator answers that the key was committed before (the driver
   died after it, before Spark recorded the batch), the manifest it kept
   replaces this run's: this run's halves are then strays, which brokers
   roll back;
3. then on every broker of the manifest at once (threads), its halves: each
   appends them (the coordinator those it deferred; a repeat is answered
   "already" once they are appended, and changes nothing).

So the coordinator's record is the decision, and a re-run finishes what a
dead driver started. Failed and speculative task attempts are not in Spark's
list of commit messages: their halves are strays too. ``abort`` rolls back
the halves of its tasks (never part of a committed manifest). Limit: halves
left undecided (a driver down between steps 1 and 3) are kept for the
broker's transaction timeout plus ``transaction_check_max`` check passes
(about 7.5 minutes by default); a driver back later than that finds them
rolled back and the batch fails loudly rather than half-written.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from connector.errors import ConfigError, PyMQError
from connector.protocol.msgid import decode_offset_msg_id
from connector.spark.options import WriteOptions

__all__ = ["Half", "abort", "commit", "half_of", "new_write_id", "task_key"]

log = logging.getLogger(__name__)
# (broker name, half queue offset, CommitLog offset, messages)
Half = tuple[str, int, int, int]


def new_write_id() -> str:
    """The writer id of a one-off (batch) write."""
    return f"write-{uuid.uuid4().hex}"


def task_key(write_id: str | None) -> tuple[str, int]:
    """(writer, batch) of the running task: a one-off write's own id and 0, else (a
    stream's sink) the query's id and the micro-batch id. A one-off write never takes
    the stream's key, even inside a stream's ``foreachBatch``: two writes of one batch
    would share it, and the second would be taken for a re-run and dropped."""
    if write_id is not None:
        return write_id, 0
    from pyspark import TaskContext  # noqa: PLC0415 - executors only

    ctx = TaskContext.get()
    query = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
    batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
    if not query or batch is None or not batch.isdigit():
        raise ConfigError("exactly-once: this task has no streaming query id and no write id")
    return f"query-{query}", int(batch)


def half_of(result: Any, messages: int) -> Half:
    """A half's place, from its send's result."""
    _, phys = decode_offset_msg_id(result.offset_msg_id)
    return result.queue.broker_name, result.queue_offset, phys, messages


def _by_broker(halves: Iterable[Half]) -> dict[str, list[list[int]]]:
    out: dict[str, list[list[int]]] = defaultdict(list)
    for broker, queue_offset, phys, _ in halves:
        out[broker].append([queue_offset, phys])
    return dict(out)


def commit(opts: WriteOptions, writer: str, batch: int, halves: Sequence[Half]) -> int:
    """Make the halves of (writer, batch) visible, once (see the module's text); the
    messages committed (those of the first run of the batch if it was committed
    before)."""
    if not halves:
        return 0
    from connector.client.producer import Producer  # noqa: PLC0415

    manifest: dict[str, list[list[int]]] = _by_broker(halves)
    with Producer(
        namesrv=opts.namesrv,
        group=opts.producer_group,
        **opts.security.client_kwargs,
    ) as producer:
        brokers = sorted({b.broker_name for b in producer.namesrv.cluster_info().brokers})
        coordinator = brokers[0] if brokers else min(manifest)
        first = producer.commit_batch(
            coordinator, writer, batch, manifest.get(coordinator, []), manifest=manifest,
            defer=True,
        )  # fmt: skip
        if first.get("already"):
            kept = first.get("manifest")
            if not isinstance(kept, dict):
                raise PyMQError(f"batch {batch} of {writer} was committed without a manifest")
            log.warning(
                "pymq sink: micro-batch %d was committed before (a restart after its commit); "
                "finishing that commit, this run's rows are dropped",
                batch,
            )
            manifest = {str(k): v for k, v in kept.items()}
        appends = sorted(set(manifest) | {coordinator})
        with ThreadPoolExecutor(len(appends), thread_name_prefix="pymq-commit") as pool:
            done = list(
                pool.map(
                    lambda b: producer.commit_batch(b, writer, batch, manifest.get(b, [])),
                    appends,
                )
            )
    return sum(int(d.get("messages", 0)) for d in done)


def abort(opts: WriteOptions, halves: Sequence[Half]) -> None:
    """Roll back the halves of a failed batch (best effort: the brokers roll back what
    is left after their timeout)."""
    if not halves:
        return
    from connector.client.producer import Producer  # noqa: PLC0415

    with Producer(
        namesrv=opts.namesrv,
        group=opts.producer_group,
        **opts.security.client_kwargs,
    ) as producer:
        for broker, queue_offset, phys, _ in halves:
            try:
                producer.rollback_half(broker, queue_offset, phys)
            except PyMQError as exc:
                log.info("rolling back half %d on %s: %s", queue_offset, broker, exc)
