"""High availability: a master streams its CommitLog to its slaves (RocketMQ's HA).

``protocol``: the frames of the HA port; ``master``: the master's service
(handshakes, streaming, in-sync set, confirm offset, SYNC_MASTER waits);
``slave``: the slave's client (finds its master, agrees on where to start,
appends and dispatches, acknowledges); ``metadata``: topics, consumer
offsets and delay progress, sent along.
"""
