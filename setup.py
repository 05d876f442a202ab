"""The compiled modules; everything else about the package is in pyproject.toml.

* connector.protocol._gctrack (connector/protocol/untracked.py says why): objects made
  by the hundred thousand (send_async's futures and results, pulled messages) left out
  of the cyclic garbage collector's lists.
* connector.protocol._kernels and broker.store._kernels: the per-record loops of the
  client (pull answers checked and indexed, batches encoded, Spark's Arrow columns) and
  of the store (batches checked, records laid out, the log scanned, the index threaded),
  compiled here rather than at run time (a first broker start used to spend ~26 s
  compiling them). They share connector/protocol/_kernels_common.h.

All optional: without a C compiler pymq installs without them and runs the plain-Python
twins (connector/protocol/_kernels_py.py, broker/store/_kernels_py.py; slower).
Declared here because setuptools' pyproject.toml form of extension modules is
experimental.
"""

from setuptools import Extension, setup

COMMON = ["connector/protocol/_kernels_common.h"]

setup(
    ext_modules=[
        Extension("connector.protocol._gctrack", ["connector/protocol/_gctrack.c"], optional=True),
        Extension("connector.protocol._sign", ["connector/protocol/_sign.c"], optional=True),
        Extension(
            "connector.protocol._kernels",
            ["connector/protocol/_kernels.c"],
            depends=COMMON,
            optional=True,
        ),
        Extension(
            "broker.store._kernels",
            ["broker/store/_kernels.c"],
            include_dirs=["connector/protocol"],
            depends=COMMON,
            optional=True,
        ),
    ]
)
