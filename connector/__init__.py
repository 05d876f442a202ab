"""pymq's client package: the producer, consumers, admin and the wire contract.

    from connector import Producer, PushConsumer, PullConsumer, Admin, Message, MessageQueue
    from connector import ConsumeStatus, ConsumeOrderlyStatus
    from connector import SendResult, SendStatus, PullResult, PullStatus, MQFaultStrategy

The client speaks RocketMQ's remoting protocol to NameServers and brokers
(``connector.client``); the wire contract
(``connector.protocol``, ``connector.errors``) is shared with the servers,
and the code only servers run is in ``connector.server``. The names below
load on first use, so a server importing the wire contract does not load the
client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from connector.client.admin import Admin
    from connector.client.consumer import PullConsumer
    from connector.client.latency import MQFaultStrategy
    from connector.client.producer import Producer
    from connector.client.push import ConsumeOrderlyStatus, ConsumeStatus, PushConsumer
    from connector.client.results import PullResult, SendContext, SendMessageHook, SendResult
    from connector.client.transaction import (
        LocalTransactionState,
        TransactionProducer,
        TransactionSendResult,
    )
    from connector.errors import PyMQError
    from connector.protocol import Message, MessageExt, MessageQueue
    from connector.protocol.status import PullStatus, SendStatus

__version__ = "0.1.0"

_WHERE = {
    "Admin": "connector.client.admin",
    "PullConsumer": "connector.client.consumer",
    "MQFaultStrategy": "connector.client.latency",
    "Producer": "connector.client.producer",
    "PushConsumer": "connector.client.push",
    "ConsumeStatus": "connector.client.push",
    "ConsumeOrderlyStatus": "connector.client.push",
    "PullResult": "connector.client.results",
    "SendContext": "connector.client.results",
    "SendMessageHook": "connector.client.results",
    "SendResult": "connector.client.results",
    "LocalTransactionState": "connector.client.transaction",
    "TransactionProducer": "connector.client.transaction",
    "TransactionSendResult": "connector.client.transaction",
    "PyMQError": "connector.errors",
    "Message": "connector.protocol",
    "MessageExt": "connector.protocol",
    "MessageQueue": "connector.protocol",
    "PullStatus": "connector.protocol.status",
    "SendStatus": "connector.protocol.status",
}

__all__ = [
    "Admin",
    "ConsumeOrderlyStatus",
    "ConsumeStatus",
    "LocalTransactionState",
    "MQFaultStrategy",
    "Message",
    "MessageExt",
    "MessageQueue",
    "Producer",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "PyMQError",
    "SendContext",
    "SendMessageHook",
    "SendResult",
    "SendStatus",
    "TransactionProducer",
    "TransactionSendResult",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'connector' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
