"""Which of pymq's optional parts are installed: its extras, read from its own metadata.

``pip install pymq`` brings the client (producer, consumers, admin); the
servers need ``pymq[server]`` and ``format("pymq")`` needs ``pymq[spark]``.
What each extra holds is written once, in pyproject.toml; the installed
distribution's metadata carries it (``Requires-Dist: fastapi>=0.110; extra ==
"server"``), and this module reads it there, so an entry point can say in one
line which extra to install instead of failing later with a traceback.

Only the standard library is used: this runs before anything optional loads.
"""

from __future__ import annotations

import importlib.metadata
import operator
import os
import platform
import re
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["DISTRIBUTION", "install_hint", "missing", "requirements"]

DISTRIBUTION = "pymq"

# `name[extras] >=1; marker`: the name is what the metadata and pip call the distribution
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?[^;]*(?:;(.*))?$")
_CLAUSE = re.compile(r"""^\s*\(?\s*(\w+)\s*(==|!=|<=|>=|<|>)\s*["']([^"']*)["']\s*\)?\s*$""")
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}  # fmt: skip


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def _environment() -> dict[str, str]:
    return {
        "python_version": ".".join(map(str, sys.version_info[:2])),
        "python_full_version": platform.python_version(),
        "platform_system": platform.system(),
        "platform_machine": platform.machine(),
        "sys_platform": sys.platform,
        "os_name": os.name,
        "implementation_name": sys.implementation.name,
    }


def _holds(marker: str, extra: str, env: dict[str, str]) -> bool:
    """Whether a requirement's marker (clauses joined by ``and``, as pyproject's are)
    applies to ``extra`` here. A clause this reading does not know holds."""
    in_extra = False
    for clause in re.split(r"\band\b", marker):
        match = _CLAUSE.match(clause)
        if match is None:
            continue
        key, op, value = match.groups()
        if key == "extra":
            in_extra = re.sub(r"[-_.]+", "-", value).lower() == extra
            if not in_extra:
                return False
        elif key in env:
            if key.endswith("_version"):
                if not _COMPARE[op](_version(env[key]), _version(value)):
                    return False
            elif not _COMPARE[op](env[key], value):
                return False
    return in_extra


def requirements(extra: str) -> list[str]:
    """The distributions ``pymq[extra]`` adds on this platform, as pyproject names them
    (recursive extras such as ``pymq[server,spark]`` expanded); [] when pymq's metadata
    is not installed (a checkout on ``sys.path``)."""
    try:
        declared = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    env = _environment()
    names: list[str] = []
    for req in declared:
        match = _REQUIREMENT.match(req)
        if match is None or not match.group(2) or not _holds(match.group(2), extra, env):
            continue
        name = match.group(1)
        if name.lower() == DISTRIBUTION:  # pymq[server,spark]: the extras it names
            inner = re.search(r"\[([^\]]*)\]", req)
            for sub in inner.group(1).split(",") if inner else []:
                names += [n for n in requirements(sub.strip().lower()) if n not in names]
        elif name not in names:
            names.append(name)
    return names


def missing(extra: str) -> list[str]:
    """The distributions of ``pymq[extra]`` that are not installed; [] when all are (or
    pymq's metadata is not there to say)."""
    absent = []
    for name in requirements(extra):
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            absent.append(name)
    return absent


def install_hint(extra: str, absent: list[str]) -> str:
    """What a missing extra's error says: that it is needed, what of it is missing, and
    how to install it (``needs pymq's server extra (fastapi not installed): pip install
    'pymq[server]'``)."""
    return (
        f"needs pymq's {extra} extra ({', '.join(absent)} not installed): "
        f"pip install 'pymq[{extra}]'"
    )
