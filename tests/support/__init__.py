"""The one copy of each test helper. Test modules import helpers from here only (never
from a ``conftest`` or another test module; tests/test_support.py checks it).

- ``waits``: bounded waits (``wait_until``, ``holds_for``) that say what did not happen
- ``processes``: single server processes (``Servers``) and their environment
- ``fixtures``: ``cluster``, ``servers``, ``module_servers`` (registered by tests/conftest.py)
- ``cluster``: clients against a cluster: ``create_topic`` (waits for the routes),
  ``pull_all``, ``wait_route``, ``fill``, ``Recorder``, ``consumer_progress``
- ``rest``: REST calls to a real server; ``rest_app``: the same in-process (TestClient)
- ``clocks``: ``FakeClock`` (seconds), ``FakeMsClock`` (milliseconds)
- ``store``, ``records``, ``namesrv``: the store's, the decoder's and the NameServer's
  test data
- ``acl``, ``tls``: accounts and certificates; ``push``: push consumer members;
  ``spark``: Spark test data and error lines; ``rocketmq_cpp``: the RocketMQ C++ client
"""
