"""Connections to the ClickHouse span store, from ``SPAN_STORE_URL``.

``clickhouse://user:password@host:9000/database?cluster=spans`` names the server a
process talks to (any replica of any shard will do: the ``Distributed`` table reaches
the others), the database and the cluster the tables are spread over. Without
``cluster`` the store is one server's tables (a development server, or an embedded
engine in tests). Further parameters:

- ``insert_quorum`` (2 with a cluster, else 0): replicas that must hold a block before
  an insert is acknowledged;
- anything else is the native protocol driver's own (``secure``, ``verify``,
  ``ca_certs``, ``alt_hosts``, ``connect_timeout``, ``send_receive_timeout``,
  ``compression``…); ``clickhouses://`` speaks TLS. ``send_receive_timeout`` is 60 s
  unless given (the driver's 300 s would outlast a drain's statement budget).

A process holds one connection per thread (the driver's client is not thread-safe).
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from django.core.exceptions import ImproperlyConfigured

from apps.ingest.span_store.base import SpanStoreUnavailable

SCHEMES = ("clickhouse", "clickhouses")
QUORUM_TIMEOUT_MS = 20_000
# Server error codes that say a server, replica or coordinator is away or overloaded,
# not that what was sent is wrong: the work waits and is done again.
AWAY_CODES = frozenset(
    {
        159,  # TIMEOUT_EXCEEDED
        164,  # READONLY
        202,  # TOO_MANY_SIMULTANEOUS_QUERIES
        209,  # SOCKET_TIMEOUT
        210,  # NETWORK_ERROR
        225,  # NO_ZOOKEEPER
        242,  # TABLE_IS_READ_ONLY (its replica lost ZooKeeper)
        252,  # TOO_MANY_PARTS
        279,  # ALL_CONNECTION_TRIES_FAILED
        285,  # TOO_FEW_LIVE_REPLICAS
        286,  # UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE
        289,  # REPLICA_IS_NOT_IN_QUORUM
        319,  # UNKNOWN_STATUS_OF_INSERT
        999,  # KEEPER_EXCEPTION
    }
)


@dataclass(frozen=True)
class ClickHouseConfig:
    driver_url: str
    database: str
    cluster: str
    insert_quorum: int
    user: str = "default"
    password: str = ""

    @property
    def on_cluster(self) -> str:
        return f" ON CLUSTER {self.cluster}" if self.cluster else ""

    @property
    def insert_settings(self) -> dict[str, int]:
        """An insert acknowledged only once every shard it reaches holds it on the
        quorum's replicas."""
        settings = {"insert_distributed_sync": 1}
        if self.insert_quorum:
            # A replica away answers after this instead of the server's ten minutes, so
            # the drain gives its batches back while the pass still holds its lease.
            settings |= {
                "insert_quorum": self.insert_quorum,
                "insert_quorum_timeout": QUORUM_TIMEOUT_MS,
            }
        return settings

    def at(self, address: str) -> "ClickHouseConfig":
        """The same store, reached at one server (``host:port``) of its cluster."""
        parts = urlsplit(self.driver_url)
        query = [(k, v) for k, v in parse_qsl(parts.query) if k != "alt_hosts"]
        credentials = parts.netloc.rpartition("@")[0]
        netloc = f"{credentials}@{address}" if credentials else address
        url = urlunsplit(parts._replace(netloc=netloc, query=urlencode(query)))
        return replace(self, driver_url=url)


def clickhouse_config(url: str) -> ClickHouseConfig:
    """The store's settings from its URL; ImproperlyConfigured names what is wrong."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ImproperlyConfigured(f"SPAN_STORE_URL must start with clickhouse://, not {url!r}")
    database = parts.path.strip("/") or "default"
    if not database.replace("_", "").isalnum():
        raise ImproperlyConfigured(f"SPAN_STORE_URL: {database!r} is no database name")
    query = dict(parse_qsl(parts.query))
    cluster = query.pop("cluster", "")
    if cluster and not cluster.replace("_", "").isalnum():
        raise ImproperlyConfigured(f"SPAN_STORE_URL: {cluster!r} is no cluster name")
    query.setdefault("send_receive_timeout", "60")
    quorum_text = query.pop("insert_quorum", "2" if cluster else "0")
    if not quorum_text.isdigit():
        raise ImproperlyConfigured("SPAN_STORE_URL: insert_quorum must be a whole number")
    # Every statement names its tables with their database, so the connection needs none:
    # it can run before the database exists (``span_store_migrate``).
    driver_url = urlunsplit(parts._replace(path="", query=urlencode(query)))
    return ClickHouseConfig(
        driver_url,
        database,
        cluster,
        int(quorum_text),
        user=unquote(parts.username or "default"),
        password=unquote(parts.password or ""),
    )


_local = threading.local()


def _client(config: ClickHouseConfig) -> Any:
    from clickhouse_driver import Client

    clients = getattr(_local, "clients", None)
    if clients is None:
        clients = _local.clients = {}
    client = clients.get(config.driver_url)
    if client is None:
        client = Client.from_url(config.driver_url)
        # Ids are bytes, and texts go in and out as the UTF-8 they are stored as: no
        # decoding of what a reader may not need.
        client.client_settings["strings_as_bytes"] = True
        clients[config.driver_url] = client
    return client


@contextmanager
def clickhouse(config: ClickHouseConfig) -> Iterator[Any]:
    """This thread's client; a server or replica away becomes ``SpanStoreUnavailable``."""
    from clickhouse_driver import errors

    client = _client(config)
    try:
        yield client
    except (errors.NetworkError, errors.SocketTimeoutError, EOFError, OSError) as exc:
        client.disconnect()
        raise SpanStoreUnavailable(f"the span store is away: {exc}") from exc
    except errors.ServerException as exc:
        if exc.code in AWAY_CODES:
            raise SpanStoreUnavailable(f"the span store refused: {_first_line(exc)}") from exc
        raise


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
