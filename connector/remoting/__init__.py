"""The client's transports.

- ``client``: RocketMQ's remoting protocol, one connection per server with
  many requests in flight (what producers and consumers use);
- ``http``: keep-alive HTTP/1.1 to the servers' REST API (what ``Admin``
  uses for broker administration).
"""

from connector.remoting.client import RemotingClient, RemotingConnection
from connector.remoting.http import HttpConnection, HttpPool, HttpResponse

__all__ = ["HttpConnection", "HttpPool", "HttpResponse", "RemotingClient", "RemotingConnection"]
