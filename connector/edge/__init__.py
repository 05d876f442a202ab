"""The HTTP edge both servers share: one error body, one way to serve.

The NameServer and the broker import this; the client never does.
"""

from connector.edge.errors import error_response, install_error_handlers
from connector.edge.serve import ServerSpec, bind_socket, serve

__all__ = ["ServerSpec", "bind_socket", "error_response", "install_error_handlers", "serve"]
