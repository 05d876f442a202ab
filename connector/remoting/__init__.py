"""The client's transport.

- ``client``: RocketMQ's remoting protocol, one connection per server with
  many requests in flight (what producers and consumers use).
"""

from connector.remoting.client import RemotingClient, RemotingConnection

__all__ = ["RemotingClient", "RemotingConnection"]
