"""The one compiled module; everything else about the package is in pyproject.toml.

connector.protocol._gctrack (connector/protocol/untracked.py says why): objects made
by the hundred thousand (send_async's futures and results, pulled messages) left out
of the cyclic garbage collector's lists. Optional: without a C compiler pymq
installs without it (pure Python, slower there). Declared here because setuptools'
pyproject.toml form of extension modules is experimental.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("connector.protocol._gctrack", ["connector/protocol/_gctrack.c"], optional=True)
    ]
)
