"""File helpers: segment names, atomic writes with a .bak, JSON loading that
falls back to the backup, and the store checkpoint.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from broker.store.checkpoint import Checkpoint
from broker.store.files import atomic_write, file_name, load_json, parse_file_name, save_json
from broker.store.mapped_file import MappedFile
from connector.errors import StoreError
from tests.support.store import TOPIC, StoreFactory, put


def test_file_names() -> None:
    assert file_name(0) == "00000000000000000000"
    assert file_name(1073741824) == "00000000001073741824"
    assert len(file_name(2**63 - 1)) == 20
    for offset in (0, 4096, 1073741824, 2**63 - 1):
        assert parse_file_name(file_name(offset)) == offset
    for bad in ("", "123", "0000000000000000000a", "000000000000000000000", "checkpoint", "x.bak"):
        assert parse_file_name(bad) is None


def test_atomic_write_keeps_backup(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    atomic_write(path, b"v1")
    assert path.read_bytes() == b"v1"
    assert not path.with_name("topics.json.bak").exists()
    atomic_write(path, b"v2")
    assert path.read_bytes() == b"v2"
    assert path.with_name("topics.json.bak").read_bytes() == b"v1"
    atomic_write(path, b"v3")
    assert path.with_name("topics.json.bak").read_bytes() == b"v2"
    assert not path.with_name("topics.json.tmp").exists()
    assert sorted(p.name for p in path.parent.iterdir()) == ["topics.json", "topics.json.bak"]


def test_atomic_write_without_backup(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    atomic_write(path, b"a", keep_backup=False)
    atomic_write(path, b"b", keep_backup=False)
    assert path.read_bytes() == b"b"
    assert not (tmp_path / "f.json.bak").exists()


def test_atomic_write_replaces_stale_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    (tmp_path / "f.json.tmp").write_bytes(b"half-written garbage from a crash")
    atomic_write(path, b"good")
    assert path.read_bytes() == b"good"
    assert not (tmp_path / "f.json.tmp").exists()


def test_concurrent_writers_of_one_file_take_turns(tmp_path: Path) -> None:
    # a periodic persist and a request-driven one share the file's temp name:
    # without turns, one renames the temp from under the other (FileNotFoundError)
    path = tmp_path / "consumerOffset.json"
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def writer(n: int) -> None:
        start.wait()
        try:
            for i in range(40):
                atomic_write(path, f"writer {n} version {i}".encode())
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not errors, errors[:3]
    assert path.read_bytes().decode().startswith("writer ")
    assert path.with_name(path.name + ".bak").read_bytes().decode().startswith("writer ")
    assert not path.with_name(path.name + ".tmp").exists()


def test_save_load_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "consumerOffset.json"
    value = {"TopicTest@group": {"0": 12, "1": 7}, "unicode": "ключ", "n": [1, 2.5, None, True]}
    save_json(path, value)
    assert load_json(path) == value
    assert json.loads(path.read_bytes()) == value  # plain JSON an operator can read


def test_load_json_missing_everything(tmp_path: Path) -> None:
    assert load_json(tmp_path / "nope.json") is None


@pytest.mark.parametrize("damage", ["corrupt", "empty", "missing"])
def test_load_json_falls_back_to_backup(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "delayOffset.json"
    save_json(path, {"version": 1})
    save_json(path, {"version": 2})
    if damage == "corrupt":
        path.write_bytes(b'{"version": 3, "trunc')
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()
    assert load_json(path) == {"version": 1}


def test_load_json_corrupt_without_backup(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b"\xff\xfe not json")
    assert load_json(path) is None


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    cp = Checkpoint(
        physic_offset=4096,
        logic_offset=5000,
        index_offset=4500,
        physic_timestamp=1_700_000_000_000,
        logic_timestamp=1_700_000_000_001,
        clean_shutdown=True,
        queue_offsets={"TopicTest": {"0": 10, "3": 2}, "Other": {"1": 0}},
    )
    cp.save(path)
    assert Checkpoint.load(path) == cp
    assert cp.recover_from == 4096
    cp2 = Checkpoint(physic_offset=9000, logic_offset=9000, index_offset=9000)
    cp2.save(path)
    assert Checkpoint.load(path) == cp2
    assert Checkpoint.load(path.with_name("checkpoint.bak")) == cp


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b"[1, 2, 3]",
        b"{}",
        b'{"physic_offset": 1, "logic_offset": 2}',
        b'{"physic_offset": "x", "logic_offset": 2, "index_offset": 3}',
        b'{"physic_offset": 1, "logic_offset": 2, "index_offset": 3, "queue_offsets": [1]}',
        b'{"physic_offset": 1, "logic_offset": 2, "index_offset": 3,'
        b' "queue_offsets": {"T": {"0": "many"}}}',
        b'{"physic_offset": 1, "logic_offset": 2, "index_offset": 3, "queue_offsets": {"T": [1]}}',
        b'{"physic_offset": 1, "logic_offset": 2, "index_offset": 3, "queue_offsets": {"T": 5}}',
        b'"a string"',
        b"null",
        b"42",
    ],
)
def test_malformed_checkpoint_is_none(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "checkpoint"
    path.write_bytes(raw)
    assert Checkpoint.load(path) is None


def test_missing_checkpoint_is_none(tmp_path: Path) -> None:
    assert Checkpoint.load(tmp_path / "checkpoint") is None


def test_store_layout(make_store: StoreFactory) -> None:
    store = make_store()
    put(store, b"x", queue_id=3, keys=["k"])
    store.flush_queues_and_checkpoint()
    root = store.config.store_dir
    assert {p.name for p in root.iterdir()} >= {
        "commitlog",
        "consumequeue",
        "index",
        "config",
        "checkpoint",
        "abort",
    }
    assert (root / "consumequeue" / TOPIC / "3" / "00000000000000000000").is_file()
    assert (root / "commitlog" / "00000000000000000000").stat().st_size == 65536
    cp = Checkpoint.load(root / "checkpoint")
    assert cp is not None
    assert not cp.clean_shutdown
    assert cp.queue_offsets == {TOPIC: {"3": 1}}


def test_checkpoints_from_two_threads(make_store: StoreFactory) -> None:
    # the checkpoint service and an explicit flush at once: neither fails, and the
    # file ends with the newer snapshot, never an older one written after it
    store = make_store()
    errors: list[BaseException] = []
    done = threading.Event()

    def checkpointer() -> None:
        try:
            while not done.is_set():
                store.flush_queues_and_checkpoint()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    th = threading.Thread(target=checkpointer)
    th.start()
    try:
        for i in range(200):
            put(store, f"m{i}".encode())
            store.flush_queues_and_checkpoint()
    finally:
        done.set()
        th.join(timeout=60)
    assert not errors, errors[:3]
    last = store.flush_queues_and_checkpoint()
    cp = Checkpoint.load(store.config.checkpoint_path)
    assert cp is not None
    assert cp.queue_offsets == last.queue_offsets == {TOPIC: {"0": 200}}


def test_store_starts_with_malformed_checkpoint(make_store: StoreFactory) -> None:
    store = make_store()
    for i in range(5):
        put(store, f"m{i}".encode(), keys=[f"k{i}"])
    store.shutdown()
    store.config.checkpoint_path.write_bytes(
        b'{"physic_offset": 1, "logic_offset": 2, "index_offset": 3, "queue_offsets": {"T": 5}}'
    )
    again = make_store()
    assert again.recovery is not None
    assert not again.recovery.checkpoint_found
    assert again.get_message(TOPIC, 0, 0).bodies() == [f"m{i}".encode() for i in range(5)]
    assert [m.body for m in again.query_message(TOPIC, "k3")] == [b"m3"]


def test_pwrite_is_seen_through_the_mapping_and_bounded(tmp_path: Path) -> None:
    mf = MappedFile(tmp_path / file_name(0), 8192)
    try:
        mf.pwrite(4090, b"0123456789")  # across a page boundary
        assert mf.read(4090, 10) == b"0123456789"  # the mapping reads the same page cache
        assert bytes(mf.buffer()[4088:4102]) == b"\0\x000123456789\0\0"
        with pytest.raises(StoreError, match="overruns"):
            mf.pwrite(8190, b"abc")
        assert mf.read(8188, 4) == b"\0" * 4  # nothing of the refused write landed
    finally:
        mf.close()


def _vm_flags(path: Path) -> set[str]:
    """The kernel's flags of this process' mapping of ``path`` (``rr``: no readahead)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(" " + str(path)):
            for follow in lines[i + 1 :]:
                if follow.startswith("VmFlags:"):
                    return set(follow.split()[1:])
    raise AssertionError(f"{path} is not mapped")


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="Linux's /proc only")
def test_only_the_commitlog_tail_is_mapped_without_readahead(make_store: StoreFactory) -> None:
    store = make_store()
    segments = store.commit_log.queue
    put(store, b"x" * 100)
    first = segments.files[0]
    assert first.tail and "rr" in _vm_flags(first.path)
    while len(segments.files) < 2:  # 64 KiB segments: roll onto a second one
        put(store, b"y" * 4000)
    second = segments.files[1]
    assert second.tail and "rr" in _vm_flags(second.path)
    assert not first.tail and "rr" not in _vm_flags(first.path)
    # a tail read far behind the write position asks for its range and reads the same
    assert first.read(0, 200) == store.commit_log.read(first.file_from_offset, 200)
    # the ConsumeQueue's files keep the kernel's readahead
    cq = store.consume_queue(TOPIC, 0)
    assert cq is not None and "rr" not in _vm_flags(cq.files.files[0].path)


def test_a_reopened_store_maps_its_tail_without_readahead(make_store: StoreFactory) -> None:
    store = make_store()
    put(store, b"x" * 100)
    store.shutdown()
    again = make_store()
    tail = again.commit_log.queue.files[-1]
    assert tail.tail
    if Path("/proc/self/smaps").exists():
        assert "rr" in _vm_flags(tail.path)


def test_a_cold_read_of_the_tail_asks_for_its_range(tmp_path: Path) -> None:
    mf = MappedFile(tmp_path / file_name(0), 16 << 20)
    try:
        data = bytes(range(256)) * 4096  # 1 MiB
        mf.pwrite(0, data)
        mf.pwrite(8 << 20, b"end")
        mf.wrote_position = (8 << 20) + 3
        mf.set_tail(True)
        # far behind the write position (and not page aligned): WILLNEED, then the copy
        assert mf.read(5, len(data) - 5) == data[5:]
        assert mf.read(8 << 20, 3) == b"end"
    finally:
        mf.close()
