"""pymq's client package: the producer, consumers, admin and the wire contract.

    from connector import Producer, PullConsumer, Admin, Message, MessageQueue
    from connector import SendResult, SendStatus, PullResult, PullStatus, MQFaultStrategy

The client speaks to NameServers and brokers over HTTP only; it never
imports server code.
"""

from connector.client.admin import Admin
from connector.client.consumer import PullConsumer
from connector.client.latency import MQFaultStrategy
from connector.client.producer import Producer
from connector.client.results import PullResult, SendContext, SendMessageHook, SendResult
from connector.errors import PyMQError
from connector.protocol import Message, MessageExt, MessageQueue
from connector.protocol.status import PullStatus, SendStatus

__version__ = "0.1.0"

__all__ = [
    "Admin",
    "MQFaultStrategy",
    "Message",
    "MessageExt",
    "MessageQueue",
    "Producer",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PyMQError",
    "SendContext",
    "SendMessageHook",
    "SendResult",
    "SendStatus",
    "__version__",
]
