"""Message columns -> the batch encoding, in compiled code: no Python work per message.

The plain messages of a batch (a body, perhaps tags, nothing else) need no
Python object per message to be encoded: ``encode_plain`` writes each
message's batch entry (``connector.protocol.batch``: TOTALSIZE, MAGIC,
BODYCRC, FLAG, BODYLEN, body, PROPLEN, properties ``UNIQ_KEY`` and
``TAGS``) from the concatenated bodies and tags, CRC included, and returns a
``PreparedBatch``. Used by ``Producer.send_batch`` and the Spark sink; the
same checks as the per-message path: no empty body, none above the size
limit, tags without the properties separators. The loop is C
(``connector.protocol._kernels``; see ``connector.protocol.scan``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from connector.errors import MessageIllegalError, MessageTooLargeError
from connector.protocol.batch import BATCH_ENTRY_OVERHEAD, PreparedBatch
from connector.protocol.msgid import IdBlock
from connector.protocol.record import MESSAGE_MAGIC_CODE, record_size
from connector.protocol.scan import kernels

__all__ = ["encode_plain"]

UNIQ_PREFIX = b"UNIQ_KEY\x01"
TAGS_PREFIX = b"TAGS\x01"
_UNIQ = np.frombuffer(UNIQ_PREFIX, dtype=np.uint8)
_TAGS = np.frombuffer(TAGS_PREFIX, dtype=np.uint8)
ID_LEN = 32


def encode_plain(
    topic: str,
    body: np.ndarray,
    body_off: np.ndarray,
    tag_data: np.ndarray | None,
    tag_off: np.ndarray | None,
    has_tag: np.ndarray | None,
    msg_ids: Sequence[str],
    max_body_size: int,
    *,
    scratch: Callable[[int], np.ndarray] | None = None,
) -> PreparedBatch:
    """One batch: message i's body is ``body[body_off[i]:body_off[i+1]]`` (uint8,
    int64 offsets), its tags ``tag_data[tag_off[i]:tag_off[i+1]]`` where
    ``has_tag[i]`` (all three None: no tags), ``msg_ids[i]`` its UNIQ_KEY (an
    ``IdBlock`` is written from its head and counter, its strs never made).

    With ``scratch`` (a uint8 array of at least the size asked for), the batch
    is written there and ``data`` is a view of it, valid until the caller
    reuses the scratch: megabytes of fresh memory a batch cost ~12 page faults
    per 16 KiB message here, more than the encoding itself."""
    n = len(body_off) - 1
    lengths = np.diff(body_off)
    if n and lengths.min() <= 0:
        raise MessageIllegalError("message body must be non-empty")
    if n and lengths.max() > max_body_size:
        raise MessageTooLargeError(int(lengths.max()), max_body_size)
    if isinstance(msg_ids, IdBlock):
        if len(msg_ids) != n:
            raise MessageIllegalError("one msg id per message is needed")
        ids, id_first = msg_ids.head.encode(), msg_ids.first
    else:
        ids, id_first = "".join(msg_ids).encode(), -1
        if len(ids) != n * ID_LEN:
            raise MessageIllegalError("one 32-char msg id per message is needed")
    if tag_data is None or tag_off is None or has_tag is None:
        tag_data, tag_off, has_tag = (
            np.empty(0, np.uint8),
            np.zeros(n + 1, np.int64),
            np.zeros(n, np.bool_),
        )
    else:
        span = tag_data[tag_off[0] : tag_off[-1]] if n else tag_data[:0]
        if ((span == 1) | (span == 2)).any():
            raise MessageIllegalError("tags contain a \\x01 or \\x02 separator")
    props = (
        len(UNIQ_PREFIX)
        + ID_LEN
        + 1
        + np.where(has_tag, len(TAGS_PREFIX) + np.diff(tag_off) + 1, 0)
    )
    total = int((BATCH_ENTRY_OVERHEAD + lengths + props).sum())
    out = np.empty(total, dtype=np.uint8) if scratch is None else scratch(total)[:total]
    kernels.encode_plain(
        body, body_off, np.frombuffer(ids, dtype=np.uint8), id_first, tag_data, tag_off, has_tag,
        _UNIQ, _TAGS, MESSAGE_MAGIC_CODE, out,
    )  # fmt: skip
    topic_len = len(topic.encode())
    sizes = (lengths + props + record_size(0, topic_len, 0)).tolist()
    data = out.tobytes() if scratch is None else out.data
    return PreparedBatch(topic, data, msg_ids, sizes)
