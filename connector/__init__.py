"""pymq's client package: the producer, consumers, admin and the wire contract.

The client classes (Producer, PullConsumer, Admin) arrive with the client
issue; the wire contract is here now.
"""

from connector.errors import PyMQError
from connector.protocol import Message, MessageExt, MessageQueue

__version__ = "0.1.0"

__all__ = ["Message", "MessageExt", "MessageQueue", "PyMQError", "__version__"]
