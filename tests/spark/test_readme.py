"""Every code block of README.md runs, as written, against a local cluster.

A block is run by its language: ``python`` is executed (a block that imports
PyPI ``rocketmq``, Apache's C++ client, in a child process with its own HOME
and a hard timeout, as tests/interop does), ``console`` is a transcript whose
``$ pymq admin ...`` commands are run in order and must end as shown (exit
status, table columns, JSON keys, error lines), ``yaml`` is an ACL file read by
the servers' loader. Any other block must follow a ``<!-- not run: reason -->``
line, and a block that is neither runnable nor marked fails the first test.

The blocks of one README section run in order, Python blocks in one namespace
(as a reader runs them in one shell), the sections in README order against one
cluster (the Spark sections read topics written by the one before). As
written means: only the cluster's addresses replace ``127.0.0.1:9876`` (its
NameServer) and ``127.0.0.1:9880`` (that NameServer's REST port), ``/tmp/``
becomes the test's own folder, and the msgIds a transcript's ``message send``
printed stand for the ones this run's send printed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from connector.local import LocalCluster
from connector.server.acl.plain import parse_plain_acl

README = Path(__file__).resolve().parents[2] / "README.md"
RUNNABLE = ("python", "console", "yaml")
_MARKER = re.compile(r"^<!-- not run: (.+) -->$")
_MSG_ID = re.compile(r"^[0-9A-F]{32}$")
COMMAND_TIMEOUT_S = 60.0
CHILD_TIMEOUT_S = 120.0


@dataclass
class Block:
    lang: str
    code: str
    line: int  # of the opening fence, 1-based
    section: str
    not_run: str | None  # the marker's reason


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)


def parse(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.split("\n")
    section, i = "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        elif line.startswith("```"):
            start, lang = i, line[3:].strip()
            marker = _MARKER.match(lines[i - 1]) if i else None
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                i += 1
            code = "\n".join(lines[start + 1 : i]) + "\n"
            reason = marker.group(1) if marker else None
            blocks.append(Block(lang, code, start + 1, section, reason))
        i += 1
    return blocks


BLOCKS = parse(README.read_text(encoding="utf-8"))


def sections() -> list[Section]:
    out: dict[str, Section] = {}
    for block in BLOCKS:
        if block.not_run is None and block.lang in RUNNABLE:
            out.setdefault(block.section, Section(block.section)).blocks.append(block)
    return list(out.values())


def test_every_block_is_run_or_says_why_not() -> None:
    unmarked = [
        f"README.md:{b.line} ({b.lang or 'no language'})"
        for b in BLOCKS
        if b.not_run is None and b.lang not in RUNNABLE
    ]
    assert not unmarked, "blocks neither runnable nor marked <!-- not run: reason -->: " + (
        ", ".join(unmarked)
    )
    for block in BLOCKS:
        if block.lang == "console" and block.not_run is None:
            for cmd in commands(block.code):
                assert cmd[:2] == ["pymq", "admin"], f"README.md:{block.line}: runs {cmd}"
    # the markers are not a way out: most blocks run
    assert sum(b.not_run is None for b in BLOCKS) >= 15


@dataclass
class Run:
    cluster: LocalCluster
    tmp: Path
    names: dict[str, Any] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)  # the transcript's msgIds -> this run's

    def substitute(self, text: str) -> str:
        http = self.cluster.namesrvs[0].http_addr
        text = text.replace("127.0.0.1:9876", self.cluster.namesrv_addr)
        return text.replace("127.0.0.1:9880", http).replace("/tmp/", f"{self.tmp}/")


def commands(code: str) -> list[list[str]]:
    return [shlex.split(c) for c, _ in transcript(code)]


def transcript(code: str) -> list[tuple[str, list[str]]]:
    """A console block's (command, the lines it showed) pairs."""
    out: list[tuple[str, list[str]]] = []
    for line in code.rstrip("\n").split("\n"):
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out and line.strip():
            out[-1][1].append(line)
    return out


def run_python(block: Block, run: Run) -> None:
    code = run.substitute(block.code)
    if re.search(r"^\s*(from|import) rocketmq\b", code, re.M):
        # librocketmq's threads and logs stay out of this process (tests/interop's rule)
        home = run.tmp / f"home-{block.line}"
        home.mkdir()
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "HOME": str(home)},
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=10)
        # the client raises on a failed send: a clean exit is the snippet's success
        assert proc.returncode == 0, f"README.md:{block.line} exited {proc.returncode}:\n{out}{err}"
        return
    exec(compile(code, f"README.md:{block.line}", "exec"), run.names)


def run_console(block: Block, run: Run) -> None:
    env = {**os.environ, "PYMQ_NAMESRV": run.cluster.namesrv_addr}
    for raw, printed in transcript(block.code):
        args = [run.ids.get(a, a) for a in shlex.split(run.substitute(raw))]
        done = subprocess.run(
            [sys.executable, "-m", "connector.cli", *args[1:]],
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            env=env,
            check=False,
        )
        where = f"README.md:{block.line}: $ {raw}\n{done.stdout}{done.stderr}"
        shown = [run.substitute(x) for x in printed]
        if shown and shown[0].startswith(("pymq admin", "usage:")):  # a failure, shown
            assert done.returncode != 0, where
            assert done.stderr.splitlines()[-1] == shown[-1], where
            continue
        assert done.returncode == 0, where
        got = done.stdout.splitlines()
        if not shown:
            continue
        if shown[0].startswith(("{", "[")):
            want = json.loads("\n".join(shown)) if len(shown) > 1 else json.loads(shown[0])
            have = json.loads(done.stdout) if len(shown) > 1 else json.loads(got[0])
            assert type(have) is type(want), where
            if isinstance(want, dict):
                assert have.keys() == want.keys(), where
            elif want:
                assert have and have[0].keys() == want[0].keys(), where
        elif re.fullmatch(r"[A-Z_ ]+", shown[0]):  # a table: the same columns, and rows
            assert got and got[0].split() == shown[0].split(), where
            assert len(got) > 1 or len(shown) == 1, where
            if args[2:4] == ["message", "send"]:  # its msgIds stand for the transcript's
                ids = zip(shown[1].split(), got[1].split(), strict=False)
                run.ids.update((a, b) for a, b in ids if _MSG_ID.match(a))
        else:  # lines of a console consumer: as many as shown
            assert len(got) + len(done.stderr.splitlines()) == len(shown), where


def run_yaml(block: Block) -> None:
    rules = parse_plain_acl(block.code, f"README.md:{block.line}")
    assert rules.accounts, block.code


@pytest.fixture(scope="module")
def run(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Run:
    return Run(cluster, tmp_path_factory.mktemp("readme"))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("section", sections(), ids=lambda s: s.title)
def test_the_section_runs(section: Section, run: Run, request: pytest.FixtureRequest) -> None:
    code = "".join(b.code for b in section.blocks)
    spark = request.getfixturevalue("spark") if "pyspark" in code else None
    run.names = {"__name__": "__readme__"}
    try:
        for block in section.blocks:
            if block.lang == "python":
                run_python(block, run)
            elif block.lang == "console":
                run_console(block, run)
            else:
                run_yaml(block)
        # what a section waits for happened: a push consumer's listener ran (the events
        # its snippets wait on, with a timeout, are set) ...
        waited = [k for k, v in run.names.items() if isinstance(v, threading.Event)]
        assert all(run.names[k].is_set() for k in waited), waited
        # ... and its streaming queries run without an error
        for query in spark.streams.active if spark else []:  # type: ignore[attr-defined]
            query.processAllAvailable()
            assert query.exception() is None
    finally:
        close_what_it_started(run.names)
        for query in spark.streams.active if spark else []:  # type: ignore[attr-defined]
            query.stop()


def close_what_it_started(names: dict[str, Any]) -> None:
    """The clients a section left running (the admin section's producer and consumer)."""
    for value in names.values():
        shutdown = getattr(value, "shutdown", None)
        if callable(shutdown) and type(value).__module__.startswith("connector."):
            shutdown()
