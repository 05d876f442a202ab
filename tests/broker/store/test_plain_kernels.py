"""A store run on the plain-Python kernels (``PYMQ_KERNELS=python``, what an install
without a C compiler runs) writes and reads what the C kernels do: the same script in
two processes, one per implementation, gives the same answers and the same files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# every store path with a kernel: batch, single and group appends, a read, an index
# query, then a restart without a clean shutdown (abnormal recovery: the log scan)
SCRIPT = """
import json, sys
from pathlib import Path
from broker.store import kernels
from broker.store.config import StoreConfig
from broker.store.inner import BatchInner, MessageInner
from broker.store.store import MessageStore
from connector.protocol import scan
from connector.protocol.message import Message
from connector.protocol.pulled import decode_records

config = StoreConfig(
    store_dir=Path(sys.argv[1]), mapped_file_size_commit_log=1 << 14,
    consume_queue_entries_per_file=64, max_hash_slot_num=64, max_index_num=512,
)
clock = lambda: 1_700_000_000.0  # the same store timestamps in both runs
store = MessageStore(config, clock=clock)
store.start()
msgs = [Message(topic="Plain", body=bytes([65 + i]) * (40 + 37 * i), keys=[f"k{i}", "all"],
                tags=f"t{i % 3}") for i in range(24)]
uniq = [f"U{i:04d}" for i in range(24)]
results = []
for lo in range(0, 24, 8):  # batches that cross segment ends
    put = store.put_messages(BatchInner.from_messages(
        msgs[lo:lo + 8], queue_id=0, born_timestamp=1, uniq_keys=uniq[lo:lo + 8]))
    results.append(put.status.name)
results.append(store.put_message(
    MessageInner.from_message(msgs[0], queue_id=1, born_timestamp=2)).status.name)
store.put_group_nowait(
    [MessageInner.from_message(m, queue_id=q % 4, born_timestamp=3) for q, m in enumerate(msgs)])
def read():
    got = store.get_message("Plain", 0, 0, 64)
    return {
        "bodies": [b.hex() for b in got.bodies()],
        "query": sorted(m.queue_offset for m in store.query_message("Plain", "all", 64)),
        "uniq": [m.body.hex() for m in store.query_message("Plain", "U0009")],
        "decoded": [(m.msg_id, m.tags, m.keys) for m in decode_records(
            b"".join(r.data for r in got.runs))],
    }
first = read()
store.close()  # no clean shutdown: the restart runs abnormal recovery
store = MessageStore(config, clock=clock)
report = store.start()
print(json.dumps({
    "compiled": [kernels.COMPILED, scan.COMPILED],
    "puts": results, "first": first, "again": read(),
    "recovered": [report.abnormal, report.records_scanned, report.reason],
}))
store.shutdown()
"""


def run_store(tmp: Path, *, plain: bool) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "PYMQ_KERNELS"}
    if plain:
        env["PYMQ_KERNELS"] = "python"
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp)],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, object] = json.loads(out.stdout.splitlines()[-1])
    return result


@pytest.mark.timeout(600)
def test_the_plain_kernels_store_what_the_compiled_ones_do(tmp_path: Path) -> None:
    compiled = run_store(tmp_path / "c", plain=False)
    plain = run_store(tmp_path / "py", plain=True)
    assert compiled.pop("compiled") == [True, True]
    assert plain.pop("compiled") == [False, False]
    assert plain == compiled
    first = compiled["first"]
    assert isinstance(first, dict)
    assert len(first["bodies"]) == 24 + 6  # queue 0: the batches, a quarter of the group
    assert len(first["query"]) == 24 + 1 + 24  # every message has the key "all"
    assert first == compiled["again"]  # recovered to the same state
    abnormal, scanned, _ = compiled["recovered"]  # type: ignore[misc]
    assert abnormal is True and scanned > 0  # the log scan ran
    # and the files on disk are the same, byte for byte (CommitLog, ConsumeQueues, index)
    c_files = sorted(
        p.relative_to(tmp_path / "c") for p in (tmp_path / "c").rglob("*") if p.is_file()
    )
    p_files = sorted(
        p.relative_to(tmp_path / "py") for p in (tmp_path / "py").rglob("*") if p.is_file()
    )
    assert c_files == p_files
    for rel in c_files:
        if rel.parts[0] in ("commitlog", "consumequeue", "index"):
            assert (tmp_path / "c" / rel).read_bytes() == (tmp_path / "py" / rel).read_bytes(), rel
