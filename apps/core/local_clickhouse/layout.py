"""Where a local cluster keeps its files and listens, from its directory and base port alone."""

import os
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = "spans"
DATABASE = "budgets"
SHARDS = 2
REPLICAS = 2
HOST = "127.0.0.1"
DEFAULT_BASE_PORT = 19000
# A server's ZooKeeper session outlives a crash by this long: until then its replicas stay
# "active" and a new process cannot take them over. Shorter than ClickHouse's 30 s so that
# tests that kill a replica wait less; ZooKeeper's tick (2 s) adds to it.
SESSION_TIMEOUT_S = 10
ZOOKEEPER_TICK_S = 2
DIR_VARIABLE = "LOCAL_CLICKHOUSE_DIR"
BASE_PORT_VARIABLE = "LOCAL_CLICKHOUSE_BASE_PORT"


class LocalClickHouseError(Exception):
    """The cluster could not be set up, started or stopped; the message says why."""


@dataclass(frozen=True)
class Endpoint:
    """One ClickHouse server of the cluster and its three ports."""

    shard: int
    replica: int
    port: int
    http_port: int
    interserver_port: int
    host: str = HOST

    @property
    def name(self) -> str:
        return f"s{self.shard}r{self.replica}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Cluster:
    home: Path
    base_port: int

    def endpoints(self) -> list[Endpoint]:
        """The servers, shard by shard: native ports base+0.., HTTP +10.., interserver +20.."""
        pairs = [(s, r) for s in range(1, SHARDS + 1) for r in range(1, REPLICAS + 1)]
        base = self.base_port
        return [
            Endpoint(shard, replica, base + i, base + 10 + i, base + 20 + i)
            for i, (shard, replica) in enumerate(pairs)
        ]

    def endpoint(self, shard: int, replica: int) -> Endpoint:
        for endpoint in self.endpoints():
            if (endpoint.shard, endpoint.replica) == (shard, replica):
                return endpoint
        raise LocalClickHouseError(f"no shard {shard} replica {replica} (each counts from 1)")

    @property
    def zookeeper_port(self) -> int:
        return self.base_port + 30

    @property
    def zookeeper_dir(self) -> Path:
        return self.home / "zookeeper"

    def server_dir(self, endpoint: Endpoint) -> Path:
        return self.home / endpoint.name

    def url(self, *, database: str = DATABASE) -> str:
        """The ``SPAN_STORE_URL`` of this cluster, through shard 1's first replica."""
        first = self.endpoints()[0]
        return f"clickhouse://default:@{first.address}/{database}?cluster={CLUSTER}"


def cluster_at(*, home: Path | None = None, base_port: int | None = None) -> Cluster:
    """The cluster the arguments name, else the environment's, else ``clickhouse/`` in the
    settings' ``VAR_DIR`` (``var/`` in the checkout)."""
    var_dir = Path(os.environ.get("VAR_DIR") or ROOT / "var")
    home = home or Path(os.environ.get(DIR_VARIABLE) or var_dir / "clickhouse")
    port = base_port or int(os.environ.get(BASE_PORT_VARIABLE) or DEFAULT_BASE_PORT)
    return Cluster(home=home.resolve(), base_port=port)
