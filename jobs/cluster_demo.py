"""The best end-to-end demo until the Spark job lands: a local cluster at work.

Starts a NameServer and two SYNC_FLUSH brokers as real processes (`pymq
local`'s LocalCluster), creates a topic on both, sends messages to every
queue of both brokers through the binary batch endpoint and a few through the
JSON one (with keys, and one delayed by a second), reads everything back by
queue offset and compares it byte for byte, crashes one broker with kill -9,
restarts it on the same store and checks again, then stops the cluster.

    python jobs/cluster_demo.py [--data DIR] [--messages 20000]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

import httpx

from connector.local import LocalCluster
from connector.protocol.batch import encode_batch
from connector.protocol.msgid import UniqKeyGenerator
from connector.protocol.properties import encode_properties
from connector.protocol.scan import index_records
from connector.protocol.wire import RECORDS_CONTENT_TYPE

TOPIC = "DemoTopic"
QUEUES = 4


def say(text: str) -> None:
    print(text, flush=True)


def route_brokers(http: httpx.Client, namesrv_http: str) -> dict[str, str]:
    """Broker name -> its REST base URL, from the NameServer's REST route."""
    deadline = time.monotonic() + 20
    while True:
        resp = http.get(f"http://{namesrv_http}/routes/{TOPIC}")
        if resp.status_code == 200:
            brokers = {b["broker_name"]: b["http_addrs"]["0"] for b in resp.json()["brokers"]}
            if len(brokers) == 2:
                return brokers
        if time.monotonic() > deadline:
            raise SystemExit(f"the NameServer has no route for {TOPIC}: {resp.content!r}")
        time.sleep(0.1)


def send_all(
    http: httpx.Client, brokers: dict[str, str], total: int
) -> dict[tuple[str, int], list[str]]:
    """Batches of 500 to every (broker, queue); returns body hashes per queue, in order."""
    uniq = UniqKeyGenerator()
    sent: dict[tuple[str, int], list[str]] = {}
    targets = [(name, q) for name in sorted(brokers) for q in range(QUEUES)]
    n = 0
    batch_no = 0
    while n < total:
        name, q = targets[batch_no % len(targets)]
        entries = []
        for _ in range(min(500, total - n)):
            body = f"event {n} from the demo".encode().ljust(100, b".")
            entries.append((body, 0, encode_properties({"UNIQ_KEY": uniq.next_id()})))
            sent.setdefault((name, q), []).append(hashlib.sha1(body).hexdigest())
            n += 1
        resp = http.post(
            f"{brokers[name]}/topics/{TOPIC}/messages/batch", params={"queue_id": q},
            content=encode_batch(entries), headers={"content-type": "application/octet-stream"},
        )  # fmt: skip
        if resp.status_code != 200 or resp.json()["status"] != "SEND_OK":
            raise SystemExit(f"batch send failed: {resp.status_code} {resp.content[:200]!r}")
        batch_no += 1
    return sent


def read_all(http: httpx.Client, brokers: dict[str, str]) -> dict[tuple[str, int], list[str]]:
    got: dict[tuple[str, int], list[str]] = {}
    for name, url in brokers.items():
        for q in range(QUEUES):
            offset = 0
            while True:
                resp = http.get(
                    f"{url}/topics/{TOPIC}/queues/{q}/messages",
                    params={"offset": offset, "max": 5000},
                    headers={"accept": RECORDS_CONTENT_TYPE},
                )
                if resp.headers.get("x-pymq-status") != "FOUND":
                    break
                index = index_records(resp.content)
                got.setdefault((name, q), []).extend(
                    hashlib.sha1(b).hexdigest() for b in index.bodies()
                )
                offset = int(resp.headers["x-pymq-next-begin-offset"])
    return got


def check(sent: dict[tuple[str, int], list[str]], got: dict[tuple[str, int], list[str]]) -> int:
    bad = [k for k in sent if got.get(k, [])[: len(sent[k])] != sent[k]]
    if bad:
        raise SystemExit(f"queues {bad} do not hold what was acknowledged")
    return sum(len(v) for v in sent.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=None, help="cluster data dir (default: temp)")
    ap.add_argument("--messages", type=int, default=20_000)
    args = ap.parse_args()
    data = args.data or Path(tempfile.mkdtemp(prefix="pymq-demo-"))
    say(f"starting a NameServer and 2 SYNC_FLUSH brokers; data and logs under {data}")
    with (
        LocalCluster(data, brokers=2, namesrvs=1, broker_args=["--flush", "sync"]) as cluster,
        httpx.Client(timeout=30, trust_env=False) as http,
    ):
        for proc in [*cluster.namesrvs, *cluster.brokers]:
            say(f"  {proc.name:<10} remoting {proc.addr}, http http://{proc.http_addr}")
        config = {"read_queue_nums": QUEUES, "write_queue_nums": QUEUES, "perm": 6}
        for b in cluster.brokers:
            http.put(f"http://{b.http_addr}/topics/{TOPIC}", json=config).raise_for_status()
        brokers = route_brokers(http, cluster.namesrvs[0].http_addr)
        say(f"route of {TOPIC} from the NameServer: {brokers}")

        t0 = time.perf_counter()
        sent = send_all(http, brokers, args.messages)
        send_s = time.perf_counter() - t0
        rate = args.messages / send_s
        say(f"sent {args.messages:,} messages in batches of 500 in {send_s:.2f} s")
        say(f"  ({rate:,.0f} msgs/s; each batch fsynced before its answer)")

        a = brokers["broker-a"]
        keyed = http.post(
            f"{a}/topics/{TOPIC}/messages",
            json={"body": "an order", "keys": ["order-42"], "tags": "orders", "queue_id": 0},
        ).json()
        delayed = http.post(
            f"{a}/topics/{TOPIC}/messages",
            json={"body": "one second later", "delay_level": 1, "queue_id": 1},
        ).json()
        sent_at = time.time()
        found = http.get(f"{a}/topics/{TOPIC}/messages", params={"key": "order-42"}).json()
        say(f"JSON send {keyed['status']}, delayed send {delayed['status']}")
        say(f"found by key order-42: {len(found['messages'])} message(s)")

        t0 = time.perf_counter()
        got = read_all(http, brokers)
        read_s = time.perf_counter() - t0
        total = check(sent, got)
        say(f"read back {sum(len(v) for v in got.values()):,} messages by queue offset in "
            f"{read_s:.2f} s; all {total:,} acknowledged ones identical")  # fmt: skip
        for name in sorted(brokers):
            per_queue = [len(got.get((name, q), [])) for q in range(QUEUES)]
            say(f"  {name}: {sum(per_queue):,} messages, per queue {per_queue}")

        say("kill -9 broker-b, then restart it on the same store")
        cluster.restart_broker("broker-b", crash=True)
        brokers["broker-b"] = f"http://{cluster.broker('broker-b').http_addr}"
        health = http.get(f"{brokers['broker-b']}/health").json()
        total = check(sent, read_all(http, brokers))
        abnormal = health["recovery"]["abnormal"]
        say(f"broker-b back at {brokers['broker-b']} (abnormal recovery: {abnormal})")
        say(f"  all {total:,} acknowledged messages identical")

        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            resp = http.get(
                f"{a}/topics/{TOPIC}/queues/1/messages", params={"offset": 0, "max": 10000}
            )
            msgs = resp.json()["messages"]
            hit = [m for m in msgs if m["properties"].get("DELAY") is None
                   and m["body_base64"] == "b25lIHNlY29uZCBsYXRlcg=="]  # fmt: skip
            if hit:
                say(f"delayed message delivered {hit[0]['store_timestamp'] / 1000 - sent_at:.2f} s "
                    "after it was sent (level 1 = 1 s)")  # fmt: skip
                break
            time.sleep(0.2)
        else:
            raise SystemExit("the delayed message never arrived")
    say("cluster stopped; demo OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
