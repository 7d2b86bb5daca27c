"""Start and stop the whole cluster, or one of its servers."""

import fcntl
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.client import HTTPConnection
from pathlib import Path

from apps.core.local_clickhouse.configs import USERS_XML, server_config, zoo_cfg
from apps.core.local_clickhouse.layout import (
    DATABASE,
    HOST,
    SESSION_TIMEOUT_S,
    ZOOKEEPER_TICK_S,
    Cluster,
    Endpoint,
    LocalClickHouseError,
    cluster_at,
)
from apps.core.local_clickhouse.processes import (
    check_ports_free,
    executable,
    launch,
    live_pid,
    terminate,
    wait_until,
)

# Debian's ZooKeeper and the SLF4J binding that logs to standard error (both are
# dependencies of its zookeeper package); its log4j set-up is made for its service.
ZOOKEEPER_CLASSPATH = ("/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar")
# Small heap, serial GC, and no C2 compiler: an idle ZooKeeper beside four servers.
JAVA_OPTIONS = [
    "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
    "-Djava.net.preferIPv4Stack=true", "-Dzookeeper.admin.enableServer=false",
    "-Dzookeeper.jmx.log4j.disable=true", "-Dorg.slf4j.simpleLogger.showDateTime=true",
]  # fmt: skip


def endpoints(cluster: Cluster | None = None) -> list[Endpoint]:
    """The four servers (shard, replica, ports), shard 1 first."""
    return (cluster or cluster_at()).endpoints()


def url(cluster: Cluster | None = None, *, database: str = DATABASE) -> str:
    return (cluster or cluster_at()).url(database=database)


def start(cluster: Cluster | None = None) -> Cluster:
    """Start ZooKeeper and the four servers unless they run; return once all answer."""
    cluster = cluster or cluster_at()
    cluster.home.mkdir(parents=True, exist_ok=True)
    with _locked(cluster):
        _start_zookeeper(cluster)
        launched = {
            e: _launch_server(cluster, e) for e in cluster.endpoints() if not server_pid(cluster, e)
        }
        for endpoint in cluster.endpoints():
            _wait_for_server(cluster, endpoint, launched.get(endpoint))
            _http_query(endpoint, f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    return cluster


def stop(cluster: Cluster | None = None) -> bool:
    """Stop the servers, then ZooKeeper (SIGTERM, SIGKILL after a while); False if none ran."""
    cluster = cluster or cluster_at()
    if not cluster.home.is_dir():
        return False
    with _locked(cluster):
        servers = {_pid_file(cluster, e): server_pid(cluster, e) for e in cluster.endpoints()}
        terminate({path: pid for path, pid in servers.items() if pid})
        zookeeper = zookeeper_pid(cluster)
        if zookeeper:
            terminate({cluster.zookeeper_dir / "zookeeper.pid": zookeeper})
    return any(servers.values()) or zookeeper is not None


def is_running(cluster: Cluster | None = None) -> bool:
    """Whether ZooKeeper and all four servers run (not whether they answer yet)."""
    cluster = cluster or cluster_at()
    servers = [server_pid(cluster, endpoint) for endpoint in cluster.endpoints()]
    return zookeeper_pid(cluster) is not None and all(servers)


def server_pid(cluster: Cluster, endpoint: Endpoint) -> int | None:
    """The pid of a running server, None if it does not run."""
    marker = str(cluster.server_dir(endpoint) / "config.xml")
    return live_pid(_pid_file(cluster, endpoint), marker=marker)


def zookeeper_pid(cluster: Cluster) -> int | None:
    """The pid of the running ZooKeeper, None if it does not run."""
    home = cluster.zookeeper_dir
    return live_pid(home / "zookeeper.pid", marker=str(home / "zoo.cfg"))


def kill_replica(shard: int, replica: int, *, cluster: Cluster | None = None) -> bool:
    """SIGKILL one server, as a crash would; False if it was not running.

    Its ZooKeeper session lives on for ``SESSION_TIMEOUT_S``: meanwhile the shard's other
    replica counts it alive (a quorum insert waits for it, then fails with "Timeout while
    waiting for quorum"), and afterwards not ("Number of alive replicas (1) is less than
    requested quorum (2)").
    """
    cluster = cluster or cluster_at()
    endpoint = cluster.endpoint(shard, replica)
    with _locked(cluster):
        pid = server_pid(cluster, endpoint)
        if pid:
            terminate({_pid_file(cluster, endpoint): pid}, sig=signal.SIGKILL)
            _killed_marker(cluster, endpoint).write_text(f"{time.time()}\n")
    return pid is not None


def start_replica(shard: int, replica: int, *, cluster: Cluster | None = None) -> None:
    """Start one server again and wait until it answers.

    After ``kill_replica`` this first waits out the killed process's ZooKeeper session
    (at most ``SESSION_TIMEOUT_S`` plus a tick): a server started sooner answers queries
    but replicates nothing until then ("Replica ... appears to be already active"), so
    that a test could not tell when it catches up.
    """
    cluster = cluster or cluster_at()
    endpoint = cluster.endpoint(shard, replica)
    with _locked(cluster):
        process = None if server_pid(cluster, endpoint) else _launch_server(cluster, endpoint)
        _wait_for_server(cluster, endpoint, process)


@contextmanager
def _locked(cluster: Cluster) -> Iterator[None]:
    """One start or stop at a time per cluster."""
    with (cluster.home / "lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _start_zookeeper(cluster: Cluster) -> None:
    home = cluster.zookeeper_dir
    process = None
    if zookeeper_pid(cluster) is None:
        missing = [jar for jar in ZOOKEEPER_CLASSPATH if not Path(jar).exists()]
        if missing:
            raise LocalClickHouseError(f"{missing[0]} not found: apt-get install zookeeper")
        check_ports_free(HOST, [cluster.zookeeper_port], what="ZooKeeper")
        (home / "data").mkdir(parents=True, exist_ok=True)
        (home / "zoo.cfg").write_text(zoo_cfg(cluster))
        command = [
            executable("java", fallback="/usr/bin/java"), *JAVA_OPTIONS,
            "-cp", ":".join(ZOOKEEPER_CLASSPATH),
            "org.apache.zookeeper.server.ZooKeeperServerMain", str(home / "zoo.cfg"),
        ]  # fmt: skip
        process = launch(
            command, cwd=home, log=home / "zookeeper.log", pid_file=home / "zookeeper.pid"
        )
    wait_until(
        lambda: _zookeeper_ok(cluster),
        process=process,
        what="ZooKeeper",
        log=home / "zookeeper.log",
    )


def _zookeeper_ok(cluster: Cluster) -> bool:
    """Whether ZooKeeper serves sessions: ``srvr`` says its mode only then (``ruok`` answers
    imok earlier, while it still closes each session with "ZooKeeperServer not running")."""
    with socket.create_connection((HOST, cluster.zookeeper_port), timeout=2) as conn:
        conn.sendall(b"srvr")
        reply = b""
        while chunk := conn.recv(4096):
            reply += chunk
    return b"Mode: standalone" in reply


def _pid_file(cluster: Cluster, endpoint: Endpoint) -> Path:
    return cluster.server_dir(endpoint) / "server.pid"


def _launch_server(cluster: Cluster, endpoint: Endpoint) -> subprocess.Popen[bytes]:
    """Write the server's configuration afresh and start it, once the ZooKeeper session
    of a process ``kill_replica`` ended has expired."""
    home = cluster.server_dir(endpoint)
    ports = [endpoint.port, endpoint.http_port, endpoint.interserver_port]
    check_ports_free(endpoint.host, ports, what=f"ClickHouse {endpoint.name}")
    marker = _killed_marker(cluster, endpoint)
    with suppress(FileNotFoundError, ValueError):
        expiry = float(marker.read_text()) + SESSION_TIMEOUT_S + ZOOKEEPER_TICK_S + 0.5
        time.sleep(max(0.0, expiry - time.time()))
    marker.unlink(missing_ok=True)
    for sub in ("data", "scratch", "user_files", "format_schemas", "log"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    (home / "config.xml").write_text(server_config(cluster, endpoint))
    (home / "users.xml").write_text(USERS_XML)
    command = [
        executable("clickhouse-server", fallback="/usr/sbin/clickhouse-server"),
        f"--config-file={home / 'config.xml'}",
    ]
    return launch(
        command, cwd=home, log=home / "log" / "stderr.log", pid_file=_pid_file(cluster, endpoint)
    )


def _killed_marker(cluster: Cluster, endpoint: Endpoint) -> Path:
    return cluster.server_dir(endpoint) / "killed_at"


def _wait_for_server(
    cluster: Cluster, endpoint: Endpoint, process: subprocess.Popen[bytes] | None
) -> None:
    log = cluster.server_dir(endpoint) / "log"  # server.err.log; stderr.log before it opens
    what = f"ClickHouse {endpoint.name} ({endpoint.address})"
    wait_until(
        lambda: _http_query(endpoint, "SELECT 1") == "1", process=process, what=what, log=log
    )


def _http_query(endpoint: Endpoint, query: str) -> str:
    conn = HTTPConnection(endpoint.host, endpoint.http_port, timeout=10)
    try:
        conn.request("POST", "/", body=query.encode())
        response = conn.getresponse()
        body = response.read().decode(errors="replace").strip()
    finally:
        conn.close()
    if response.status != 200:
        raise LocalClickHouseError(f"{endpoint.name}: {query!r} failed: {body}")
    return body
