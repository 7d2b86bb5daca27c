"""``python -m apps.core.local_clickhouse start | stop | status | url``"""

import argparse
import sys
from collections.abc import Sequence

from apps.core.local_clickhouse.control import (
    is_running,
    server_pid,
    start,
    stop,
    zookeeper_pid,
)
from apps.core.local_clickhouse.layout import CLUSTER, HOST, LocalClickHouseError, cluster_at


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m apps.core.local_clickhouse",
        description="A local ClickHouse cluster (2 shards x 2 replicas) and its ZooKeeper.",
    )
    parser.add_argument("command", choices=["start", "stop", "status", "url"])
    command = parser.parse_args(argv).command
    cluster = cluster_at()
    try:
        if command == "start":
            start(cluster)
            print(f"ClickHouse cluster {CLUSTER} is running under {cluster.home}: {cluster.url()}")
        elif command == "stop":
            print("ClickHouse cluster stopped" if stop(cluster) else "ClickHouse was not running")
        elif command == "status":
            print(f"zookeeper {HOST}:{cluster.zookeeper_port} {_state(zookeeper_pid(cluster))}")
            for e in cluster.endpoints():
                state = _state(server_pid(cluster, e))
                print(
                    f"shard {e.shard} replica {e.replica} {e.address} (http {e.http_port}) {state}"
                )
            return 0 if is_running(cluster) else 3
        else:
            print(cluster.url())
    except LocalClickHouseError as exc:
        print(f"local ClickHouse: {exc}", file=sys.stderr)
        return 1
    return 0


def _state(pid: int | None) -> str:
    return f"running (pid {pid})" if pid else "not running"


if __name__ == "__main__":
    sys.exit(main())
