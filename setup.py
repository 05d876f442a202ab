"""The one compiled module; everything else about the package is in pyproject.toml.

connector.client._gctrack (connector/client/untracked.py says why): send_async's
futures and results left out of the cyclic garbage collector's lists, whose full
passes were ~40 % of a per-message send_async run. Optional: without a C
compiler pymq installs without it (pure Python, slower there). Declared here
because setuptools' pyproject.toml form of extension modules is experimental.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("connector.client._gctrack", ["connector/client/_gctrack.c"], optional=True)
    ]
)
