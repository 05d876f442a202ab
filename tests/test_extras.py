"""Each install of pymq brings what its host needs, and only that.

``pip install pymq`` is the client (an application host), ``pymq[server]`` the
NameServer and the broker, ``pymq[spark]`` ``format("pymq")``. Each is
installed here into a fresh venv by a real resolve: pip picks pymq's
dependencies from pyproject.toml's lists, offline, out of a wheelhouse
filled once (``pip wheel``, from pip's registry and its cache) and kept
between runs under ``~/.cache/pymq-tests``; pymq itself is a wheel built
from a copy of the checkout. Then each venv shows what it can and cannot
import and run: the servers of the ``server`` venv serve the client of the
client-only venv, and a Spark job of the ``spark`` venv.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the server extra brings tomli
    import tomli as tomllib

CHECKOUT = Path(__file__).resolve().parents[1]
PIP_TIMEOUT_S = 600.0  # a first fill of the wheelhouse downloads ~500 MB (pyspark)
INSTALL_TIMEOUT_S = 240.0
RUN_TIMEOUT_S = 120.0
SPARK_TIMEOUT_S = 300.0  # a Spark driver's start, a write, a read, on a busy machine
READY_TIMEOUT_S = 120.0
WHEELHOUSE_ROOT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pymq-tests"

# what only servers, only Spark, and only tests use: an install without the extra lacks them
SERVER_MODULES = ["fastapi", "starlette", "uvicorn", "prometheus_client", "yaml"]
SPARK_MODULES = ["pyspark", "pyarrow"]


def run(cmd: list[str | Path], *, timeout: float = RUN_TIMEOUT_S, check: bool = True,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    done = subprocess.run(
        [str(c) for c in cmd],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=clean_env(),
        cwd=cwd,
    )
    if check:
        assert done.returncode == 0, f"{cmd}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def clean_env() -> dict[str, str]:
    """This environment without what would let the checkout or this venv leak in."""
    drop = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PYMQ_")}


def declared(*extras: str) -> list[str]:
    """pyproject.toml's requirements of pymq's base and of ``extras`` (not pymq itself)."""
    project = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += [r for r in project["optional-dependencies"][extra] if not r.startswith("pymq")]
    return reqs


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    """Wheels of every dependency of pymq[all], filled once per requirement list."""
    reqs = declared("server", "spark")
    text = "\n".join([repr(sys.version_info[:2]), *reqs])
    key = hashlib.sha256(text.encode()).hexdigest()[:12]
    house = WHEELHOUSE_ROOT / f"wheelhouse-{key}"
    if not (house / "complete").is_file():
        filling = WHEELHOUSE_ROOT / f"filling-{key}-{os.getpid()}"
        shutil.rmtree(filling, ignore_errors=True)
        run([sys.executable, "-m", "pip", "wheel", "--quiet", "-w", filling, *reqs],
            timeout=PIP_TIMEOUT_S)  # fmt: skip
        (filling / "complete").write_text("\n".join(reqs) + "\n")
        shutil.rmtree(house, ignore_errors=True)
        filling.rename(house)
    return house


@pytest.fixture(scope="module")
def pymq_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pymq's wheel, built offline from a copy of the checkout's distribution inputs."""
    source = tmp_path_factory.mktemp("pymq-src")
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", "*.so")
    for entry in CHECKOUT.iterdir():
        if entry.name.startswith("."):
            continue
        if entry.is_file():
            shutil.copy2(entry, source / entry.name)
        elif (entry / "__init__.py").is_file():
            shutil.copytree(entry, source / entry.name, ignore=skip)
    dist = tmp_path_factory.mktemp("dist")
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index"]
    run([*build, "--no-build-isolation", "-w", dist, source], timeout=INSTALL_TIMEOUT_S)
    (wheel,) = dist.glob("pymq-*.whl")
    return wheel


class Venv:
    """A fresh venv with ``pymq{spec}`` resolved from the wheelhouse alone."""

    def __init__(self, where: Path, spec: str, wheelhouse: Path, wheel: Path) -> None:
        self.where = where
        self.wheelhouse = wheelhouse
        run([sys.executable, "-m", "venv", "--without-pip", where])
        self.python = where / "bin" / "python"
        self.pip("install", f"pymq{spec}", "--find-links", wheel.parent)

    def pip(self, *args: str | Path) -> None:
        # --isolated: no pip.conf (its indexes and find-links); --no-index: the wheelhouse only
        cmd = [sys.executable, "-m", "pip", "--isolated", "--python", self.python]
        run([*cmd, *args, "--no-index", "--find-links", self.wheelhouse] if args[0] == "install"
            else [*cmd, *args], timeout=INSTALL_TIMEOUT_S)  # fmt: skip

    def pymq(self, *args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run([self.where / "bin" / "pymq", *args], check=check, cwd=self.where)

    def python_json(self, code: str, *args: str) -> object:
        out = run([self.python, "-c", code, *args], cwd=self.where, timeout=SPARK_TIMEOUT_S)
        line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
        return json.loads(line.removeprefix("RESULT "))

    def importable(self, modules: list[str]) -> dict[str, bool]:
        code = (
            "import importlib.util, json, sys\n"
            "print('RESULT ' + json.dumps({m: importlib.util.find_spec(m) is not None"
            " for m in sys.argv[1:]}))"
        )
        found = self.python_json(code, *modules)
        assert isinstance(found, dict)
        return found


Venvs = Callable[[str], Venv]  # "[server]" -> the venv of pymq[server], made once


@pytest.fixture(scope="module")
def venvs(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, pymq_wheel: Path
) -> Iterator[Venvs]:
    made: dict[str, Venv] = {}

    def make(spec: str) -> Venv:
        if spec not in made:
            where = tmp_path_factory.mktemp("venv") / "v"
            made[spec] = Venv(where, spec, wheelhouse, pymq_wheel)
        return made[spec]

    yield make
    for venv in made.values():  # the spark one alone is ~700 MB
        shutil.rmtree(venv.where, ignore_errors=True)


@pytest.fixture(scope="module")
def servers(venvs: Venvs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``pymq local`` (a NameServer and a broker) run by the ``pymq[server]`` venv; the
    NameServer's address."""
    venv = venvs("[server]")
    data = tmp_path_factory.mktemp("cluster")
    proc = subprocess.Popen(
        [str(venv.where / "bin" / "pymq"), "local", "--brokers", "1", "--data", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=clean_env(),
        cwd=venv.where,
    )
    lines: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "pymq local ready:" in line:
                ready.set()
        ready.set()  # it exited

    threading.Thread(target=pump, daemon=True).start()
    try:
        ready.wait(READY_TIMEOUT_S)
        match = next((re.search(r"namesrv (\S+),", x) for x in lines if "ready:" in x), None)
        assert match, "pymq local did not get ready:\n" + "".join(lines)
        yield match.group(1).rstrip(",")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


# Runs in the client-only venv: a topic's round trip, then what the process loaded.
CLIENT = """
import json, sys
from connector import Message, Producer, PullConsumer

ns, topic = sys.argv[1], sys.argv[2]
with Producer(group="extras", namesrv=ns) as p:
    for i in range(10):
        p.send(Message(topic=topic, body=b"m%d" % i))
got = []
with PullConsumer(group="extras", namesrv=ns) as c:
    for mq in c.fetch_queues(topic):
        got += [m.body.decode() for m in c.pull(mq, offset=0, max_nums=32).messages]
loaded = sorted({name.split(".")[0] for name in sys.modules})
print("RESULT " + json.dumps({"bodies": sorted(got), "loaded": loaded}))
"""


def test_the_client_install_has_no_server_nor_spark(venvs: Venvs, servers: str) -> None:
    venv = venvs("")
    found = venv.importable([*SERVER_MODULES, *SPARK_MODULES, "numpy", "httpx", "orjson"])
    assert found == {
        **dict.fromkeys(SERVER_MODULES + SPARK_MODULES, False),
        "numpy": True, "httpx": True, "orjson": True,
    }  # fmt: skip
    # the admin command line and the client, against servers of another install
    created = venv.pymq("admin", "--namesrv", servers, "topic", "create", "Extras", "--queues", "2")
    assert "Extras" in created.stdout
    result = venv.python_json(CLIENT, servers, "Extras")
    assert isinstance(result, dict)
    assert result["bodies"] == sorted(f"m{i}" for i in range(10))
    assert not set(result["loaded"]) & {*SERVER_MODULES, *SPARK_MODULES}
    status = json.loads(venv.pymq("admin", "--namesrv", servers, "topic", "status", "Extras",
                                  "--json").stdout)  # fmt: skip
    assert sum(q["max_offset"] for q in status) == 10


@pytest.mark.parametrize("command", ["broker", "namesrv", "local"])
def test_a_server_without_the_server_extra_says_which_to_install(
    venvs: Venvs, command: str
) -> None:
    venv = venvs("")
    done = venv.pymq(command, "--port", "0", check=False)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"pymq {command}: needs pymq's server extra (fastapi, uvicorn, prometheus-client, "
        "pyyaml not installed): pip install 'pymq[server]'"
    ]


def test_the_server_install_has_no_spark(venvs: Venvs, servers: str) -> None:
    venv = venvs("[server]")
    assert venv.importable([*SERVER_MODULES, *SPARK_MODULES]) == {
        **dict.fromkeys(SERVER_MODULES, True), **dict.fromkeys(SPARK_MODULES, False),
    }  # fmt: skip
    # its servers run (the fixture started them); its admin sees them
    assert "DefaultCluster" in venv.pymq("admin", "--namesrv", servers, "cluster", "list").stdout


# Runs in the spark venv: format("pymq") found by Spark, a write and a read.
SPARK_JOB = """
import json, os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession

ns, topic = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.pyspark.python", sys.executable).getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.range(20).selectExpr("cast(concat('s-', id) as binary) as body").write.mode(
    "append").format("pymq").option("namesrv", ns).option("topic", topic).save()
got = spark.read.format("pymq").option("namesrv", ns).option("topic", topic).load()
print("RESULT " + json.dumps(sorted(bytes(r.body).decode() for r in got.collect())))
spark.stop()
"""

MISSING_SOURCE = """
import json, pyspark_pymq
try:
    pyspark_pymq.DefaultSource({})
except ImportError as exc:
    print("RESULT " + json.dumps([pyspark_pymq.DefaultSource.name(), str(exc)]))
"""


def test_the_spark_install_runs_format_pymq_and_no_server(venvs: Venvs, servers: str) -> None:
    venv = venvs("[spark]")
    assert venv.importable([*SERVER_MODULES, *SPARK_MODULES]) == {
        **dict.fromkeys(SERVER_MODULES, False), **dict.fromkeys(SPARK_MODULES, True),
    }  # fmt: skip
    venv.pymq("admin", "--namesrv", servers, "topic", "create", "ExtrasSpark", "--queues", "2")
    assert venv.python_json(SPARK_JOB, servers, "ExtrasSpark") == sorted(
        f"s-{i}" for i in range(20)
    )
    # pyspark without the rest of the extra (`pip install pymq pyspark`): Spark still
    # lists format("pymq") (a failing import would fail every format's lookup), and
    # using it says which extra to install
    venv.pip("uninstall", "--yes", "pyarrow")
    assert venv.python_json(MISSING_SOURCE) == [
        "pymq",
        'format("pymq") needs pymq\'s spark extra (pyarrow not installed): '
        "pip install 'pymq[spark]'",
    ]


def test_pymq_all_is_the_server_and_spark_extras_together(
    wheelhouse: Path, pymq_wheel: Path, tmp_path: Path
) -> None:
    # resolved, not installed: what pip would install for pymq[all]
    cmd = [sys.executable, "-m", "pip", "--isolated", "install", "--dry-run", "--ignore-installed",
           "--no-index", "--find-links", wheelhouse, "--find-links", pymq_wheel.parent,
           "--report", tmp_path / "report.json", "pymq[all]"]  # fmt: skip
    run(cmd, timeout=INSTALL_TIMEOUT_S)
    report = json.loads((tmp_path / "report.json").read_text())
    names = {item["metadata"]["name"].lower() for item in report["install"]}
    assert {"pymq", "fastapi", "uvicorn", "pyspark", "pyarrow", "numpy", "httpx"} <= names
