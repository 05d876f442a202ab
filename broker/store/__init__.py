"""pymq."""
