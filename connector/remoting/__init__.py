"""The client's transport: keep-alive HTTP/1.1 to pymq servers.

``http.client`` parses every response header block with the email package,
which costs more than a whole broker append on a small machine; this
transport speaks just the HTTP/1.1 pymq servers answer with (Content-Length
bodies, keep-alive) over plain sockets, and pools connections per address.
"""

from connector.remoting.http import HttpConnection, HttpPool, HttpResponse

__all__ = ["HttpConnection", "HttpPool", "HttpResponse"]
