"""pymq's broker. Today: the storage engine (``broker.store``)."""
