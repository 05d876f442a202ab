"""JSON bodies of the broker's REST API (snake_case), shared by broker and client.

The binary fast paths (batch send, pull) are described in
``connector.protocol.wire``; these models are the human-friendly side.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "BatchCommitRequest",
    "BatchCommitView",
    "ClientConnection",
    "ConsumerConnections",
    "ConsumerGroupSummary",
    "ConsumerOffset",
    "ConsumerProgress",
    "EndTransactionRequest",
    "EndTransactionView",
    "MessageView",
    "OffsetCommit",
    "ProducerConnections",
    "PullResultView",
    "QueueProgress",
    "QueueStatus",
    "SendBackRequest",
    "SendMessageRequest",
    "SendResultView",
    "TopicConfigBody",
    "TopicStatus",
]

MAX_I64 = (1 << 63) - 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SendMessageRequest(_Model):
    """One message: ``body`` (UTF-8 text) or ``body_base64``, never both."""

    body: str | None = None
    body_base64: str | None = None
    tags: str | None = Field(default=None, max_length=1024)
    keys: list[str] = Field(default_factory=list, max_length=64)
    properties: dict[str, str] = Field(default_factory=dict)
    queue_id: int | None = Field(default=None, ge=0, le=MAX_I64)
    delay_level: int = Field(default=0, ge=0)
    flag: int = Field(default=0, ge=-(1 << 31), lt=1 << 31)
    born_timestamp: int | None = Field(default=None, ge=0, le=MAX_I64)
    reconsume_times: int = Field(default=0, ge=0, lt=1 << 31)
    max_reconsume_times: int | None = Field(default=None, ge=0, lt=1 << 31)
    # a transactional send of this producer group: stored as a half, invisible until
    # POST /transactions/end commits it (or the broker's check-back decides)
    transaction_group: str | None = Field(default=None, min_length=1, max_length=255)

    @model_validator(mode="after")
    def _one_body(self) -> SendMessageRequest:
        if (self.body is None) == (self.body_base64 is None):
            raise ValueError("give exactly one of body and body_base64")
        return self


class SendResultView(_Model):
    status: str
    msg_id: str
    offset_msg_id: str
    queue_id: int
    queue_offset: int
    topic: str | None = None
    broker_name: str | None = None
    transaction_id: str | None = None  # a half's (transaction_group sends only)


class EndTransactionRequest(_Model):
    """Commit or roll back a half: the ``offset_msg_id`` and ``queue_offset`` its send
    answered, and its ``producer_group``."""

    producer_group: str = Field(min_length=1, max_length=255)
    offset_msg_id: str = Field(min_length=32, max_length=32)
    queue_offset: int = Field(default=-1, ge=-1, le=MAX_I64)
    action: Literal["commit", "rollback"]


class BatchCommitRequest(_Model):
    """Commit the batch halves of one key at once (pymq's batch commit)."""

    producer_group: str = Field(min_length=1, max_length=255)
    writer: str = Field(min_length=1, max_length=255)
    batch: int = Field(ge=0, le=MAX_I64)
    # (half queue offset, CommitLog offset) of each half, as their sends answered
    halves: list[tuple[int, int]] = Field(max_length=1 << 20)
    manifest: Any = None  # kept with the commit, given back to a repeated one


class BatchCommitView(_Model):
    already: bool  # the key was committed before: nothing changed
    halves: list[int]  # half queue offsets committed under the key
    messages: int
    manifest: Any = None


class EndTransactionView(_Model):
    decision: Literal["COMMIT", "ROLLBACK"]
    already: bool  # decided so before: nothing changed
    half_queue_offset: int


class MessageView(_Model):
    msg_id: str
    offset_msg_id: str
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    body_base64: str
    tags: str | None
    keys: list[str]
    properties: dict[str, str]
    born_timestamp: int
    store_timestamp: int
    reconsume_times: int
    sys_flag: int = 0
    flag: int = 0


class PullResultView(_Model):
    status: str
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageView]


class TopicConfigBody(_Model):
    read_queue_nums: int = Field(default=8, ge=1, le=1024)
    write_queue_nums: int = Field(default=8, ge=1, le=1024)
    perm: int = 6
    order: bool = False


class QueueStatus(_Model):
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int = 0


class TopicStatus(_Model):
    topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    order: bool = False
    queues: list[QueueStatus] = Field(default_factory=list)


class OffsetCommit(_Model):
    offset: int = Field(ge=0, le=MAX_I64)
    notify_consumers: bool = Field(
        default=False,
        description="an operator's reset: the group's live consumers are told "
        "(RESET_CONSUMER_CLIENT_OFFSET) and consume the queue from this offset",
    )


class ConsumerOffset(_Model):
    group: str
    topic: str
    queue_id: int
    offset: int


class QueueProgress(_Model):
    topic: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    lag: int
    last_timestamp: int = 0


class ConsumerProgress(_Model):
    group: str
    total_lag: int
    queues: list[QueueProgress]


class ClientConnection(_Model):
    """A live client as its heartbeats show it (RocketMQ's Connection)."""

    client_id: str
    addr: str = Field(description="the client's host:port, as the broker sees it")
    language: str = Field(description="JAVA, CPP, PYTHON, ... (its requests' language)")
    version: int = Field(description="the RocketMQ version code its requests carry")
    last_heartbeat_ms: int


class ConsumerConnections(_Model):
    """A consumer group's live clients and what they subscribe (RocketMQ's
    ConsumerConnection); no connections when none is online."""

    group: str
    consume_type: str = ""
    message_model: str = ""
    consume_from_where: str = ""
    subscriptions: dict[str, str] = Field(default_factory=dict, description="topic -> tags")
    connections: list[ClientConnection] = Field(default_factory=list)


class ProducerConnections(_Model):
    group: str
    connections: list[ClientConnection] = Field(default_factory=list)


class ConsumerGroupSummary(_Model):
    """A group with clients online or offsets committed on this broker."""

    group: str
    clients: int = Field(description="clients online (heartbeating) on this broker")
    consume_type: str = ""
    message_model: str = ""
    topics: list[str] = Field(default_factory=list, description="subscribed or committed")
    total_lag: int = 0


class SendBackRequest(_Model):
    """A consumer gives a message back: retry later, or dead-letter it."""

    offset_msg_id: str = Field(min_length=32, max_length=32)
    delay_level: int = 0  # 0: the broker picks 3 + reconsume times; < 0: straight to the DLQ
    max_reconsume_times: int | None = Field(default=None, ge=0, lt=1 << 31)
    origin_topic: str | None = None
