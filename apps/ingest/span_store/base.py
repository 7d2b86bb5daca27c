"""The span store: where spans are kept once their raw batches are drained.

Spans are most of the write load and of the storage, and the one part that grows with
traffic alone. Everything else (configuration, traces' state, samples, rollups, alerts)
stays in PostgreSQL, the control plane. A store is chosen by ``SPAN_STORE_URL``:
PostgreSQL's day partitions by default, or a ClickHouse cluster.

Every reader and writer of spans goes through this interface: the drain writes, trace
analysis, the trace page, the rule tester, the unmatched spans and the what-if replay
read, and storage maintenance drops expired days.
"""

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any, NamedTuple

from apps.core.isolation import ServiceAway
from apps.ingest.models import Trace
from apps.ingest.span_store.projection import SpanProjection


class SpanStoreUnavailable(ServiceAway):
    """The store refused or could not take a write or a read (a server, a replica or its
    coordinator away). Nothing was lost: the drain leaves its batches for the next one."""


class StoredRow(NamedTuple):
    """One stored span, as analysis reads it whole; attributes and events as JSON texts."""

    trace_pk: int
    span_id: bytes
    parent_span_id: bytes | None
    name: str
    service: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: str
    events: str
    status: int


# A projected span: (trace row id, *PROJECTED_FIELDS).
ProjectedRow = tuple[Any, ...]


@dataclass
class ProjectedRead:
    """Projected spans of whole traces, in the order the traces were given, within a
    byte budget."""

    rows: list[ProjectedRow] = field(default_factory=list)
    bytes_read: int = 0
    # The first trace left out because its spans would take the read past its budget;
    # it and every trace after it were not read.
    left_out_from: int | None = None


# One attribute or event attribute of a span's details: (entry, event head as JSON text
# or None, key, value as JSON text cut to the display length, length of the value's
# text, entries in all). Entry 0 holds the span's attributes, entry n its n-th event.
ContentRow = tuple[int, str | None, str | None, str | None, int | None, int]


@dataclass
class WriteResult:
    spans_new: int = 0
    traces_touched: int = 0


class SearchSet(NamedTuple):
    """An analyzed trace's search set (``apps.analysis.trace_search``) and the keys the
    trace list orders by, as analysis found them at one revision."""

    team_id: int
    trace_pk: int
    start_ns: int
    duration_ns: int
    hashes: Sequence[int]


class SearchOrder(NamedTuple):
    """Where the trace list wants candidates from: by root start (``by_start``) or by
    duration, high to low (``descending``) or low to high, strictly past ``boundary``;
    ``start_from``/``start_until`` bound the root's start as ``[from, until)``."""

    by_start: bool
    descending: bool
    boundary: int
    start_from: int | None = None
    start_until: int | None = None


# (key, trace row id): a candidate of the trace list, the key being its start or its
# duration as the order says.
Candidate = tuple[int, int]


class SpanStore(ABC):
    """Where spans are written by the drain and read back by trace."""

    name: str

    @abstractmethod
    def spans_write(self, batches: list[tuple[int, bytes]]) -> WriteResult:
        """Store the spans of raw batches, given as (batch id, its rows as ``span_rows``
        writes them), and add the new ones to their traces, inside the drain's
        transaction; raise ``SpanStoreUnavailable`` when the store cannot take them now."""

    @abstractmethod
    def spans_of_traces(self, traces: Sequence[Trace]) -> list[StoredRow]:
        """Every stored span of the traces, whole."""

    @abstractmethod
    def spans_projected(
        self, traces: Sequence[Trace], projection: SpanProjection, max_bytes: int
    ) -> ProjectedRead:
        """The spans of ``traces`` as ``projection`` shapes them, whole traces in the
        order given, until the next trace would take what is read past ``max_bytes``."""

    @abstractmethod
    def span_start(self, trace: Trace, span_id: bytes) -> int | None:
        """The start of the copy of a span that analysis keeps (ending last, then
        starting first); None when the trace has no such span."""

    @abstractmethod
    def span_content(
        self, trace: Trace, span_id: bytes, start_ns: int, *, chars: int, limit: int
    ) -> list[ContentRow]:
        """The span's attributes and events' attributes, texts cut to ``chars``, at most
        ``limit`` of them in (entry, key) order."""

    @abstractmethod
    def days_prepare(self, first: date, last: date) -> list[str]:
        """Make the days from ``first`` to ``last`` ready for spans; name what was made."""

    @abstractmethod
    def days_drop(self, cutoff: date) -> list[str]:
        """Drop the spans of the days that end on or before ``cutoff``; name what went."""

    @abstractmethod
    def bytes_stored(self) -> int:
        """Bytes the spans take in the store (on disk, every replica counted once)."""

    # Whether the store keeps the traces' search sets beside the spans. If not, the
    # trace rows' GIN index (``trace_search_hashes``) finds the traces that hold a set's
    # elements; if so, the store does, and PostgreSQL keeps no such index (each analyzed
    # trace would write some forty entries into it).
    keeps_search_sets = False

    def search_sets_write(self, sets: Sequence[SearchSet]) -> None:
        """Keep these search sets, before the trace rows that hold them are committed:
        the store's sets are then a superset of what the rows hold. Raise
        ``SpanStoreUnavailable`` when the store cannot take them now."""
        raise NotImplementedError(f"the {self.name} store keeps no search sets")

    def search_candidates(
        self,
        *,
        team_id: int,
        groups: Sequence[Sequence[int]],
        order: SearchOrder,
        after: Candidate | None,
        limit: int,
    ) -> list[Candidate]:
        """Traces of the team whose set, at some revision, holds an element of every one
        of ``groups``, past ``order.boundary`` and strictly after ``after``, the first
        ``limit`` in the order's order. A superset of the answer: the caller checks each
        against its trace row."""
        raise NotImplementedError(f"the {self.name} store keeps no search sets")
