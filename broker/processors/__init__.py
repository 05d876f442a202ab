"""Transport-independent request processors (RocketMQ's SendMessageProcessor split).

The HTTP edge decodes a request, calls a processor, encodes its result; a
future RocketMQ-remoting edge will call the same processors.
"""

from broker.processors.admin import AdminProcessor
from broker.processors.pull import PullMessageProcessor, PullOutcome
from broker.processors.send import SendMessageProcessor, SendOutcome

__all__ = [
    "AdminProcessor",
    "PullMessageProcessor",
    "PullOutcome",
    "SendMessageProcessor",
    "SendOutcome",
]
