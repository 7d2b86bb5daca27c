"""A stand-in for ``clickhouse_driver.Client`` that runs what it is given on chdb, a
current ClickHouse engine inside this process: SQL written for the native protocol is
checked on a current server without one.

It takes the part of ``Client.execute`` the span store uses, the way the driver does:

- ``%(name)s`` parameters rendered by the driver's own ``escape_params``;
- an insert (``INSERT INTO table (columns) VALUES`` and its rows as ``params``, or its
  columns with ``columnar=True``) checked against the columns the engine reports, as
  the driver checks them against the server's sample block, then sent as a
  ``VALUES`` text, every string or id byte written ``\\xHH``;
- ``settings`` as the statement's ``SETTINGS`` clause (inserts and selects only);
- results read in ``RowBinaryWithNamesAndTypes``, so Strings come back as the exact
  bytes stored (or decoded, without ``strings_as_bytes``), with the driver's Python
  types for the column types it knows;
- an engine's refusal raised as the driver's ``ServerException`` with its code.

chdb runs one engine per process: ``chdb_engine()`` is that one, for the whole run.
Statements that would reach another server (``remote()``, ``cluster()``) are refused
before the engine sees them: a test never talks to whatever listens on a port.
"""

import atexit
import re
import shutil
import struct
import tempfile
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from functools import cache
from types import GeneratorType, SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

from clickhouse_driver.errors import ServerException
from clickhouse_driver.util.escape import escape_params

_INSERT = re.compile(
    r"\s*INSERT\s+INTO\s+(?P<table>[\w.]+)\s*(?:\((?P<columns>[^)]*)\))?\s*VALUES\s*",
    re.IGNORECASE,
)
_SELECT = re.compile(r"\s*(SELECT|WITH)\b", re.IGNORECASE)
_ELSEWHERE = re.compile(r"\b(remote|remoteSecure|cluster|clusterAllReplicas)\s*\(", re.IGNORECASE)
_CODE = re.compile(r"Code: (\d+)\. ")
# The engine's code when no server answers at the address remote() names.
NO_REMOTE_SHARD_AVAILABLE = 519
_EPOCH = date(1970, 1, 1)


@cache
def chdb_engine() -> Any:
    """The process's one embedded engine, its data in a temporary directory."""
    from chdb import session

    path = tempfile.mkdtemp(prefix="chdb-")
    engine = session.Session(path)
    atexit.register(_engine_close, engine, path)
    return engine


def _engine_close(engine: Any, path: str) -> None:
    engine.cleanup()
    shutil.rmtree(path, ignore_errors=True)


class ChdbClient:
    """The subset of ``clickhouse_driver.Client`` the span store uses, on ``engine``."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.client_settings: dict[str, Any] = {
            "strings_as_bytes": False,
            "strings_encoding": "utf-8",
            "server_side_params": False,
        }
        # Every statement given to the engine as given, and those it refused with its word.
        self.sent: list[str] = []
        self.refused: list[tuple[str, str]] = []
        self.disconnects = 0
        self.zone: str = _Reader(self._query("SELECT timezone()"), self).rows()[0][0]
        # What the driver's escaping asks of its connection: the server's time zone.
        self._context = SimpleNamespace(server_info=SimpleNamespace(get_timezone=lambda: self.zone))

    def execute(
        self,
        query: str,
        params: Any = None,
        settings: dict[str, Any] | None = None,
        columnar: bool = False,
        types_check: bool = False,
    ) -> Any:
        """As the driver's; values are checked against their columns' types whatever
        ``types_check`` says."""
        if isinstance(params, list | tuple | GeneratorType):
            return self._insert(query, params, settings or {}, columnar=columnar)
        if params is not None:
            if self.client_settings["server_side_params"]:
                raise NotImplementedError("server-side parameters")
            if not isinstance(params, dict):
                raise ValueError("Parameters are expected in dict form")
            query = query % escape_params(params, self._context)
        if settings:
            if not _SELECT.match(query):
                raise NotImplementedError(f"settings on a statement other than a select: {query}")
            query = f"{query} SETTINGS {_settings_sql(settings)}"
        rows = self._run(query)
        return [tuple(column) for column in zip(*rows, strict=True)] if columnar else rows

    def disconnect(self) -> None:
        self.disconnects += 1  # the engine stays: it is the process's

    def _insert(
        self, query: str, data: Iterable[Any], settings: dict[str, Any], *, columnar: bool
    ) -> int:
        match = _INSERT.fullmatch(query)
        if match is None:
            raise NotImplementedError(f"an insert other than INSERT INTO t (…) VALUES: {query}")
        names = match["columns"] or "*"
        types = self._sample_block(match["table"], names)
        rows = list(zip(*data, strict=True)) if columnar else [tuple(row) for row in data]
        if not rows:
            return 0
        values = []
        for row in rows:
            if len(row) != len(types):
                raise ValueError(f"a row of {len(row)} values for {len(types)} columns")
            values.append(
                "(" + ", ".join(self._literal(v, t) for v, t in zip(row, types, strict=True)) + ")"
            )
        clause = f" SETTINGS {_settings_sql(settings)}" if settings else ""
        columns = f" ({match['columns']})" if match["columns"] else ""
        self._run(f"INSERT INTO {match['table']}{columns}{clause} VALUES {', '.join(values)}")
        return len(rows)

    def _sample_block(self, table: str, names: str) -> list[str]:
        """The types of the columns an insert names, as the server's sample block says."""
        header = _Reader(self._query(f"SELECT {names} FROM {table} LIMIT 0"), self)
        count = header.varint()
        return [header.string() for _ in range(2 * count)][count:]

    def _run(self, sql: str) -> list[tuple[Any, ...]]:
        self.sent.append(sql)
        result = self._query(sql)
        return _Reader(result, self).rows() if result else []

    def _query(self, sql: str) -> bytes:
        if _ELSEWHERE.search(sql):
            message = "DB::Exception: the embedded engine reaches no other server."
            self.refused.append((sql, message))
            raise ServerException(message, NO_REMOTE_SHARD_AVAILABLE)
        try:
            result: bytes = self.engine.query(sql, "RowBinaryWithNamesAndTypes").bytes()
        except RuntimeError as exc:  # chdb's ChdbError
            text = str(exc).strip()
            self.refused.append((sql, text))
            code = _CODE.match(text)
            raise ServerException(
                text[code.end() :] if code else text, int(code[1]) if code else None
            ) from exc
        return result

    def _literal(self, value: Any, sql_type: str) -> str:
        """``value`` written for a column of ``sql_type``, or TypeError as the driver's
        column would refuse it."""
        name, args = _type_parts(sql_type)
        if name == "Nullable":
            return "NULL" if value is None else self._literal(value, args[0])
        if name == "LowCardinality":
            return self._literal(value, args[0])
        if name == "Array" and isinstance(value, list | tuple):
            return "[" + ", ".join(self._literal(v, args[0]) for v in value) + "]"
        if name in ("String", "FixedString"):
            if self.client_settings["strings_as_bytes"]:
                if isinstance(value, bytes | bytearray):
                    return "'" + "".join(f"\\x{b:02x}" for b in value) + "'"
            elif isinstance(value, str):
                text = value.encode(self.client_settings["strings_encoding"])
                return "'" + "".join(f"\\x{b:02x}" for b in text) + "'"
        elif name == "Bool" and isinstance(value, bool):
            return "true" if value else "false"
        elif (match := re.fullmatch(r"(U?)Int(\d+)", name)) and isinstance(value, int):
            bits = int(match[2])
            low, high = (0, 2**bits) if match[1] else (-(2 ** (bits - 1)), 2 ** (bits - 1))
            if not low <= value < high:
                raise TypeError(f"{value} is out of range for {sql_type}")
            return str(int(value))
        elif name in ("Float32", "Float64") and isinstance(value, int | float):
            return repr(float(value))
        elif name in ("Date", "Date32") and isinstance(value, date):
            day = value.date() if isinstance(value, datetime) else value
            return f"'{day.isoformat()}'"
        elif name == "DateTime" and isinstance(value, int | datetime):
            if isinstance(value, datetime) and value.tzinfo is None:
                return f"'{value.strftime('%Y-%m-%d %H:%M:%S')}'"  # the server's zone
            return str(int(value.timestamp()) if isinstance(value, datetime) else value)
        else:
            raise NotImplementedError(f"values for {sql_type} columns")
        raise TypeError(f"{value!r} for a {sql_type} column")


def _settings_sql(settings: dict[str, Any]) -> str:
    def value(v: Any) -> str:
        if isinstance(v, str):
            return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return str(int(v)) if isinstance(v, bool | int) else repr(v)

    return ", ".join(f"{name} = {value(v)}" for name, v in settings.items())


def _type_parts(sql_type: str) -> tuple[str, list[str]]:
    """``Tuple(Int8, Nullable(String))`` as ``('Tuple', ['Int8', 'Nullable(String)'])``."""
    if "(" not in sql_type:
        return sql_type, []
    name, inner = sql_type[: sql_type.index("(")], sql_type[sql_type.index("(") + 1 : -1]
    args, depth, quoted, start = [], 0, False, 0
    for index, char in enumerate(inner):
        if char == "'" and (index == 0 or inner[index - 1] != "\\"):
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
        elif not quoted and depth == 0 and char == ",":
            args.append(inner[start:index].strip())
            start = index + 1
    args.append(inner[start:].strip())
    return name, args


class _Reader:
    """Rows in ``RowBinaryWithNamesAndTypes``, as the driver's column types give them."""

    def __init__(self, data: bytes, client: ChdbClient) -> None:
        self.data, self.at = memoryview(data), 0
        self.as_bytes = client.client_settings["strings_as_bytes"]
        self.encoding = client.client_settings["strings_encoding"]
        self.client = client

    def take(self, size: int) -> bytes:
        chunk = bytes(self.data[self.at : self.at + size])
        self.at += size
        return chunk

    def varint(self) -> int:
        value, shift = 0, 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    def string(self) -> str:
        return self.take(self.varint()).decode()

    def rows(self) -> list[tuple[Any, ...]]:
        count = self.varint()
        types = [self.string() for _ in range(2 * count)][count:]
        rows = []
        while self.at < len(self.data):
            rows.append(tuple(self.value(t) for t in types))
        return rows

    def value(self, sql_type: str) -> Any:
        name, args = _type_parts(sql_type)
        if name == "Nullable":
            return None if self.take(1)[0] else self.value(args[0])
        if name == "LowCardinality":
            return self.value(args[0])
        if name == "Array":
            return [self.value(args[0]) for _ in range(self.varint())]
        if name == "Tuple":
            # A named element is "name Type".
            return tuple(self.value(re.sub(r"^[A-Za-z_]\w* (?=\S)", "", a)) for a in args)
        if name == "String":
            raw = self.take(self.varint())
            return raw if self.as_bytes else raw.decode(self.encoding)
        if name == "FixedString":
            raw = self.take(int(args[0]))
            return raw if self.as_bytes else raw.rstrip(b"\0").decode(self.encoding)
        if match := re.fullmatch(r"(U?)Int(\d+)", name):
            return int.from_bytes(self.take(int(match[2]) // 8), "little", signed=not match[1])
        if name == "Bool":
            return bool(self.take(1)[0])
        if name in ("Float32", "Float64"):
            size = 4 if name == "Float32" else 8
            return struct.unpack("<f" if size == 4 else "<d", self.take(size))[0]
        if name in ("Date", "Date32"):
            size = 2 if name == "Date" else 4
            days = int.from_bytes(self.take(size), "little", signed=name == "Date32")
            return _EPOCH + timedelta(days=days)
        if name == "DateTime":
            seconds = int.from_bytes(self.take(4), "little")
            zone = ZoneInfo(args[0].strip("'") if args else self.client.zone)
            moment = datetime.fromtimestamp(seconds, UTC).astimezone(zone)
            # Naive in the server's zone, as the driver gives a column without its own.
            return moment if args else moment.replace(tzinfo=None)
        raise NotImplementedError(f"reading {sql_type} columns")
