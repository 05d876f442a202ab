"""Spark data source shim (filled by the Spark connector issue)."""
