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
import json
import sys
import tempfile
import time
from pathlib import Path

from connector.protocol.batch import encode_batch
from connector.protocol.msgid import UniqKeyGenerator
from connector.protocol.properties import encode_properties
from connector.protocol.scan import index_records
from connector.protocol.wire import RECORDS_CONTENT_TYPE
from connector.remoting import HttpConnection
from connector.server.local import LocalCluster

TOPIC = "DemoTopic"
QUEUES = 4
JSON_CT = {"content-type": "application/json"}


def say(text: str) -> None:
    print(text, flush=True)


def route_brokers(namesrv_http: str) -> dict[str, str]:
    """Broker name -> its REST host:port, from the NameServer's REST route."""
    conn = HttpConnection(namesrv_http)
    deadline = time.monotonic() + 20
    while True:
        resp = conn.request("GET", f"/routes/{TOPIC}")
        if resp.status == 200:
            route = json.loads(resp.body)
            brokers = {
                b["broker_name"]: b["http_addrs"]["0"].split("://", 1)[-1] for b in route["brokers"]
            }
            if len(brokers) == 2:
                return brokers
        if time.monotonic() > deadline:
            raise SystemExit(f"the NameServer has no route for {TOPIC}: {resp.body!r}")
        time.sleep(0.1)


def send_all(brokers: dict[str, str], total: int) -> dict[tuple[str, int], list[str]]:
    """Batches of 500 to every (broker, queue); returns body hashes per queue, in order."""
    uniq = UniqKeyGenerator()
    sent: dict[tuple[str, int], list[str]] = {}
    targets = [(name, q) for name in sorted(brokers) for q in range(QUEUES)]
    conns = {name: HttpConnection(addr) for name, addr in brokers.items()}
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
        resp = conns[name].request(
            "POST", f"/topics/{TOPIC}/messages/batch?queue_id={q}", encode_batch(entries),
            {"content-type": "application/octet-stream"}, timeout_s=30,
        )  # fmt: skip
        if resp.status != 200 or json.loads(resp.body)["status"] != "SEND_OK":
            raise SystemExit(f"batch send failed: {resp.status} {resp.body[:200]!r}")
        batch_no += 1
    return sent


def read_all(brokers: dict[str, str]) -> dict[tuple[str, int], list[str]]:
    got: dict[tuple[str, int], list[str]] = {}
    for name, addr in brokers.items():
        conn = HttpConnection(addr)
        for q in range(QUEUES):
            offset = 0
            while True:
                resp = conn.request(
                    "GET", f"/topics/{TOPIC}/queues/{q}/messages?offset={offset}&max=5000",
                    None, {"accept": RECORDS_CONTENT_TYPE}, timeout_s=30,
                )  # fmt: skip
                if resp.headers.get("x-pymq-status") != "FOUND":
                    break
                index = index_records(resp.body)
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
    with LocalCluster(data, brokers=2, namesrvs=1, broker_args=["--flush", "sync"]) as cluster:
        for proc in [*cluster.namesrvs, *cluster.brokers]:
            say(f"  {proc.name:<10} remoting {proc.addr}, http http://{proc.http_addr}")
        body = json.dumps({"read_queue_nums": QUEUES, "write_queue_nums": QUEUES, "perm": 6})
        for b in cluster.brokers:
            HttpConnection(b.http_addr).request("PUT", f"/topics/{TOPIC}", body.encode(), JSON_CT)
        brokers = route_brokers(cluster.namesrvs[0].http_addr)
        say(f"route of {TOPIC} from the NameServer: {brokers}")

        t0 = time.perf_counter()
        sent = send_all(brokers, args.messages)
        send_s = time.perf_counter() - t0
        rate = args.messages / send_s
        say(f"sent {args.messages:,} messages in batches of 500 in {send_s:.2f} s")
        say(f"  ({rate:,.0f} msgs/s; each batch fsynced before its answer)")

        a = HttpConnection(brokers["broker-a"])
        keyed = a.request("POST", f"/topics/{TOPIC}/messages", json.dumps(
            {"body": "an order", "keys": ["order-42"], "tags": "orders", "queue_id": 0}).encode(),
            JSON_CT)  # fmt: skip
        delayed = a.request("POST", f"/topics/{TOPIC}/messages", json.dumps(
            {"body": "one second later", "delay_level": 1, "queue_id": 1}).encode(),
            JSON_CT)  # fmt: skip
        sent_at = time.time()
        found = json.loads(a.request("GET", f"/topics/{TOPIC}/messages?key=order-42").body)
        say(f"JSON send {json.loads(keyed.body)['status']}, delayed send "
            f"{json.loads(delayed.body)['status']}")  # fmt: skip
        say(f"found by key order-42: {len(found['messages'])} message(s)")

        t0 = time.perf_counter()
        got = read_all(brokers)
        read_s = time.perf_counter() - t0
        total = check(sent, got)
        say(f"read back {sum(len(v) for v in got.values()):,} messages by queue offset in "
            f"{read_s:.2f} s; all {total:,} acknowledged ones identical")  # fmt: skip
        for name in sorted(brokers):
            per_queue = [len(got.get((name, q), [])) for q in range(QUEUES)]
            say(f"  {name}: {sum(per_queue):,} messages, per queue {per_queue}")

        say("kill -9 broker-b, then restart it on the same store")
        cluster.restart_broker("broker-b", crash=True)
        brokers["broker-b"] = cluster.broker("broker-b").http_addr
        health = json.loads(HttpConnection(brokers["broker-b"]).request("GET", "/health").body)
        total = check(sent, read_all(brokers))
        abnormal = health["recovery"]["abnormal"]
        say(f"broker-b back at {brokers['broker-b']} (abnormal recovery: {abnormal})")
        say(f"  all {total:,} acknowledged messages identical")

        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            resp = a.request("GET", f"/topics/{TOPIC}/queues/1/messages?offset=0&max=10000")
            msgs = json.loads(resp.body)["messages"]
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
