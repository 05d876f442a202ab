"""Code only servers run, shared by the NameServer and the broker.

- ``remoting``: RocketMQ's protocol over asyncio (the data plane's server edge);
- ``serve``, ``http_errors``: the REST edge (uvicorn, one error body);
- ``settings``: flags > ``PYMQ_*`` environment > TOML file > defaults;
- ``local``: ``pymq local`` and ``LocalCluster``, servers as child processes.

The client (``connector.client``, ``connector.spark``) never imports this
package, and the servers never import the client; ``make lint`` checks both
(import-linter contracts in pyproject.toml).
"""
