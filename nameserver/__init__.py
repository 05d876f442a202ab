"""pymq's NameServer (the route registry).

Brokers register their topics here; clients look routes up. The pieces:
``NamesrvConfig`` (settings), ``RouteInfoManager`` (the route tables, pure
state), ``KvConfigManager`` (the persisted KV config) and
``nameserver.app.create_app`` (the FastAPI edge; not imported here so that
``import nameserver`` stays free of the web stack). ``pymq namesrv`` runs one.
"""

from nameserver.config import NamesrvConfig
from nameserver.kvconfig import KvConfigManager
from nameserver.routeinfo import RouteInfoManager

__all__ = ["KvConfigManager", "NamesrvConfig", "RouteInfoManager"]
