"""Start pymq servers as processes through their CLIs: ``pymq local``, jobs, tests.

The client package never imports server code; it runs ``pymq namesrv`` and
``pymq broker`` as child processes and reads their ready lines.
"""

from connector.local.cluster import LocalCluster
from connector.local.process import ServerProcess

__all__ = ["LocalCluster", "ServerProcess"]
