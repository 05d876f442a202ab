"""Access control of both servers: RocketMQ ACL 1.0 accounts and signatures (``service``),
read from ``plain_acl.yml`` (``plain``), decided by ``model``."""

from connector.server.acl.service import AclService, PendingCheck

__all__ = ["AclService", "PendingCheck"]
