"""A one-machine ClickHouse cluster for the span store: 2 shards x 2 replicas, one ZooKeeper.

    python -m apps.core.local_clickhouse start | stop | status | url

The binaries are Debian's (``apt-get install clickhouse-server clickhouse-client
zookeeper``, as .ci/run does); their services, /etc and /var/lib are never used. Each
server runs from files of its own under ``var/clickhouse/`` (``LOCAL_CLICKHOUSE_DIR``; else
``clickhouse/`` in ``VAR_DIR``): ``s<shard>r<replica>/`` holds config.xml, users.xml,
data/, log/ and server.pid; ``zookeeper/`` holds zoo.cfg, data/, zookeeper.log and its pid.

Every port is on 127.0.0.1, counted from ``LOCAL_CLICKHOUSE_BASE_PORT`` (19000: under the
kernel's ephemeral range, clear of ClickHouse's 9000/8123/9009 and ZooKeeper's 2181):

    native TCP    base + 0 .. 3     s1r1, s1r2, s2r1, s2r2
    HTTP          base + 10 .. 13   the same order
    interserver   base + 20 .. 23   replicas fetch parts from each other here
    ZooKeeper     base + 30

Another base port and directory make a second cluster beside the first (a test's). The
cluster is ``spans`` with ``internal_replication`` (a Distributed table writes to one
replica of a shard, which passes the part on); the macros ``{shard}`` (1, 2) and
``{replica}`` (s1r1 ...) name a replicated table's ZooKeeper path. Caches, pools and
threads are cut down for four servers on a small machine (``configs``).

Like ``apps.core.embedded_postgres`` this imports nothing from Django. ``start`` is
idempotent: it reuses what runs, starts what does not, waits until each answers, creates
the database ``budgets`` on each server, and the servers outlive the command until
``stop``. A test may ``kill_replica`` (SIGKILL, as a crash) and ``start_replica`` again.
"""

from apps.core.local_clickhouse.control import (
    endpoints,
    is_running,
    kill_replica,
    start,
    start_replica,
    stop,
    url,
)
from apps.core.local_clickhouse.layout import (
    CLUSTER,
    DATABASE,
    DEFAULT_BASE_PORT,
    Cluster,
    Endpoint,
    LocalClickHouseError,
    cluster_at,
)

__all__ = [
    "CLUSTER",
    "DATABASE",
    "DEFAULT_BASE_PORT",
    "Cluster",
    "Endpoint",
    "LocalClickHouseError",
    "cluster_at",
    "endpoints",
    "is_running",
    "kill_replica",
    "start",
    "start_replica",
    "stop",
    "url",
]
