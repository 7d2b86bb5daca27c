"""A team's analyzed traces in one of four orders, a keyset page at a time.

Every order is a walk of an index that starts with the team (``Trace.Meta.indexes``):
by root start (newest, oldest) or by duration (slowest, fastest), the trace's id
breaking ties. A page resumes strictly after the last row of the previous one, so a
page deep in the list costs what the first one does, where OFFSET would read every
row before it.
"""

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import BigIntegerField, ExpressionWrapper, F, Q, QuerySet
from django.db.models.enums import TextChoices

from apps.core.planner import planner_settings
from apps.core.time import NS_PER_MS, ns_to_datetime, ns_to_ms
from apps.ingest.models import ANALYZED_STATES, Trace
from apps.ingest.span_store import Candidate, SearchOrder, span_store
from apps.pipelines.models import Pipeline
from apps.teams.models import Team

MAX_INT64 = 2**63 - 1
UNMATCHED = "unmatched"
# Traces of an order a search-set filter walks before it collects its matches through
# the GIN index (see ``_narrowed_rows``): about the square root of a page times a big
# team's traces (50 · 550,000), where walking and collecting cost the same.
WALK_ROWS = 5000
# What a cursor may weigh: the longest one ``encode`` makes is about 60 characters.
MAX_CURSOR_CHARS = 80
# Candidates asked of a span store that keeps the search sets, a read at a time.
CANDIDATES_PER_READ = 1000


class TraceStatus(TextChoices):
    ERROR = "error", "error"
    INCOMPLETE = "incomplete", "incomplete"
    OK = "ok", "ok (no error, complete)"


class TraceSort(TextChoices):
    NEWEST = "newest", "newest first"
    OLDEST = "oldest", "oldest first"
    SLOWEST = "slowest", "slowest first"
    FASTEST = "fastest", "fastest first"


def duration_expression() -> ExpressionWrapper:
    """A trace's duration as SQL, written as the duration indexes are.

    Typed as a bigint: left to itself Django would check bounds as for an integer and
    find no trace longer than 2.1 s."""
    return ExpressionWrapper(F("end_ns") - F("start_ns"), output_field=BigIntegerField())


# Per order: the expression it sorts by, and whether it runs high to low.
_ORDERS: dict[str, tuple[str, bool]] = {
    TraceSort.NEWEST: ("start_ns", True),
    TraceSort.OLDEST: ("start_ns", False),
    TraceSort.SLOWEST: ("elapsed_ns", True),
    TraceSort.FASTEST: ("elapsed_ns", False),
}


@dataclass(frozen=True)
class TraceFilters:
    """``pipeline`` narrows to one pipeline; ``unmatched`` to traces that matched none.

    Durations are inclusive bounds in milliseconds; ``start_ns``/``end_ns`` bound the
    root span's start, ``[start_ns, end_ns)``.
    """

    pipeline: Pipeline | None = None
    unmatched: bool = False
    status: str = ""
    min_duration_ms: int | None = None
    max_duration_ms: int | None = None
    start_ns: int | None = None
    end_ns: int | None = None


@dataclass(frozen=True)
class TraceCursor:
    """Where the next page of an order starts: strictly after (key, id) in that order.

    ``key`` is the root's start for newest and oldest, the duration for slowest and
    fastest, in nanoseconds.
    """

    key: int
    id: int
    sort: str = TraceSort.NEWEST

    def encode(self) -> str:
        raw = f"{self.sort}.{self.key}.{self.id}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> "TraceCursor":
        """Raises ValueError for anything ``encode`` did not produce.

        A cursor without an order (``start.id``, as pages linked before there were
        orders) is one of the newest first.
        """
        if not text or len(text) > MAX_CURSOR_CHARS:
            raise ValueError("Not a cursor.")
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("ascii")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise ValueError("Not a cursor.") from exc
        parts = raw.split(".")
        if len(parts) == 2:
            parts.insert(0, TraceSort.NEWEST)
        if len(parts) != 3 or parts[0] not in TraceSort.values:
            raise ValueError("Not a cursor.")
        sort, key, pk = parts
        if not key.lstrip("-").isdigit() or not pk.isdigit() or len(key) > 20 or len(pk) > 19:
            raise ValueError("Not a cursor.")
        cursor = cls(int(key), int(pk), sort)
        if abs(cursor.key) > MAX_INT64 or cursor.id > MAX_INT64:
            raise ValueError("Not a cursor.")
        return cursor


@dataclass(frozen=True)
class SearchNarrowing:
    """Conditions on the traces' search sets, which PostgreSQL's statistics know nothing
    of. ``rows`` adds them to a query of trace rows, exactly; ``groups`` says the same
    more loosely, for a span store that keeps the sets: a trace passes only if its set
    holds an element of each group."""

    rows: Callable[[QuerySet[Trace]], QuerySet[Trace]]
    groups: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class TraceSummary:
    trace: Trace

    @property
    def trace_id(self) -> str:
        return bytes(self.trace.trace_id).hex()

    @property
    def started_at(self) -> datetime:
        return ns_to_datetime(self.trace.start_ns or 0)

    @property
    def duration_ns(self) -> int:
        return self.trace.duration_ns or 0

    @property
    def duration_ms(self) -> float:
        return ns_to_ms(self.duration_ns)


@dataclass(frozen=True)
class TracePage:
    traces: list[TraceSummary]
    next_cursor: TraceCursor | None


def traces_for_team(*, team: Team, filters: TraceFilters | None = None) -> QuerySet[Trace]:
    """Analyzed (settled or finalized) traces with a known start, newest first, by id."""
    filters = filters or TraceFilters()
    traces = (
        Trace.objects.filter(team=team, state__in=ANALYZED_STATES, start_ns__isnull=False)
        .select_related("pipeline")
        .alias(elapsed_ns=duration_expression())
    )
    if filters.unmatched:
        traces = traces.filter(pipeline__isnull=True)
    elif filters.pipeline is not None:
        traces = traces.filter(pipeline=filters.pipeline)
    if filters.status == TraceStatus.ERROR:
        traces = traces.filter(error=True)
    elif filters.status == TraceStatus.INCOMPLETE:
        traces = traces.filter(incomplete=True)
    elif filters.status == TraceStatus.OK:
        traces = traces.filter(error=False, incomplete=False)
    if filters.min_duration_ms is not None:
        traces = traces.filter(elapsed_ns__gte=filters.min_duration_ms * NS_PER_MS)
    if filters.max_duration_ms is not None:
        traces = traces.filter(elapsed_ns__lte=filters.max_duration_ms * NS_PER_MS)
    if filters.start_ns is not None:
        traces = traces.filter(start_ns__gte=filters.start_ns)
    if filters.end_ns is not None:
        traces = traces.filter(start_ns__lt=filters.end_ns)
    return traces.order_by("-start_ns", "-id")


def _after(cursor: TraceCursor) -> Q:
    """Rows strictly after the cursor in its order.

    The bound on the key alone comes first: the index range starts there. The id
    only decides between rows whose key equals the cursor's.
    """
    field, descending = _ORDERS[cursor.sort]
    op = "lt" if descending else "gt"
    return Q(**{f"{field}__{op}e": cursor.key}) & (
        Q(**{f"{field}__{op}": cursor.key}) | Q(**{field: cursor.key, f"id__{op}": cursor.id})
    )


def _key(trace: Trace, sort: str) -> int:
    start = trace.start_ns or 0
    if _ORDERS[sort][0] == "start_ns":
        return start
    return (trace.end_ns or 0) - start


def traces_page(
    *,
    team: Team,
    filters: TraceFilters | None = None,
    sort: str = TraceSort.NEWEST,
    cursor: TraceCursor | None = None,
    limit: int = 50,
    narrow: SearchNarrowing | None = None,
) -> TracePage:
    """A page of ``traces_for_team`` in ``sort`` order, after ``cursor`` (of that order);
    ``narrow`` adds conditions the steps above ingestion know (a stage over its budget,
    an attribute), keeping the order and the keyset."""
    if cursor is not None and cursor.sort != sort:
        raise ValueError("The cursor belongs to another order.")
    field, descending = _ORDERS[sort]
    traces = traces_for_team(team=team, filters=filters)
    if cursor is not None:
        traces = traces.filter(_after(cursor))
    prefix = "-" if descending else ""
    if narrow is None:
        rows = list(traces.order_by(f"{prefix}{field}", f"{prefix}id")[: limit + 1])
    else:
        bounds = filters or TraceFilters()
        rows = _narrowed_rows(traces, narrow, sort, limit + 1, team, bounds)
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        last = rows[-1]
        next_cursor = TraceCursor(_key(last, sort), last.pk, sort)
    return TracePage([TraceSummary(trace) for trace in rows], next_cursor)


def _narrowed_rows(
    traces: QuerySet[Trace],
    narrow: SearchNarrowing,
    sort: str,
    count: int,
    team: Team,
    filters: TraceFilters,
) -> list[Trace]:
    """The first ``count`` rows of ``narrow(traces)`` in ``sort`` order, for a narrowing
    that tests the search set, whose selectivity PostgreSQL cannot estimate.

    Its guess would decide between walking the order's index, testing each row (fast
    when matches are many), and collecting the matches through the GIN index to sort
    them (fast when they are few); a wrong guess walks all of a team's traces. So the
    list decides by what it meets: it walks the next ``WALK_ROWS`` traces the other
    filters let through, and only when fewer than a page of them match does it collect
    the matches past them through the indexes (GIN and B-tree bitmaps together), which
    it then sorts. The walk reads ``WALK_ROWS`` rows at most; the collection as many as
    match every filter, fewer than a page in ``WALK_ROWS`` where it starts. Where the
    span store keeps the search sets, it names the candidates past the walk instead
    (``_collected_from_store``).
    """
    field, descending = _ORDERS[sort]
    prefix = "-" if descending else ""
    order = (f"{prefix}{field}", f"{prefix}id")
    # Where the walk stops: the order's key WALK_ROWS rows on, with the other filters.
    keys = traces.order_by(*order).annotate(walk_edge=F(field))
    edge = keys.values_list("walk_edge", flat=True)[WALK_ROWS : WALK_ROWS + 1]
    boundary = next(iter(edge), None)
    near, far = ("gte", "lt") if descending else ("lte", "gt")
    walked = narrow.rows(traces)
    if boundary is not None:
        walked = walked.filter(**{f"{field}__{near}": boundary})
    with planner_settings(enable_bitmapscan=False, enable_seqscan=False):
        rows = list(walked.order_by(*order)[:count])
    if len(rows) == count or boundary is None:
        return rows
    rest = narrow.rows(traces).filter(**{f"{field}__{far}": boundary})
    if span_store().keeps_search_sets:
        order_past = SearchOrder(
            by_start=field == "start_ns",
            descending=descending,
            boundary=boundary,
            start_from=filters.start_ns,
            start_until=filters.end_ns,
        )
        return rows + _collected_from_store(
            rest, narrow, sort, order_past, count - len(rows), team_id=team.pk
        )
    with planner_settings(enable_indexscan=False, enable_indexonlyscan=False,
                          enable_seqscan=False):  # fmt: skip
        return rows + list(rest.order_by(*order)[: count - len(rows)])


def _collected_from_store(
    rest: QuerySet[Trace],
    narrow: SearchNarrowing,
    sort: str,
    order_past: SearchOrder,
    count: int,
    *,
    team_id: int,
) -> list[Trace]:
    """The first ``count`` rows of ``rest`` in ``sort`` order, from the candidates the
    span store names a read at a time in that order, each checked on its trace row.

    A candidate is named at the keys of each revision its trace's set was kept at, the
    current one included: a read's rows are those whose own key the read reached (an
    older revision's key may name a trace early; the current one names it again in its
    place), and a read shorter than asked for was the last.
    """
    field, descending = _ORDERS[sort]
    prefix = "-" if descending else ""
    store = span_store()
    found: list[Trace] = []
    after: Candidate | None = None
    while len(found) < count:
        candidates = store.search_candidates(
            team_id=team_id,
            groups=narrow.groups,
            order=order_past,
            after=after,
            limit=CANDIDATES_PER_READ,
        )
        if not candidates:
            break
        last = candidates[-1] if len(candidates) == CANDIDATES_PER_READ else None
        checked = rest.filter(pk__in={pk for _, pk in candidates})
        for row in checked.order_by(f"{prefix}{field}", f"{prefix}id"):
            place = (_key(row, sort), row.pk)
            if after is not None and not _past(place, after, descending):
                continue  # found by an earlier read, or out of its place
            if last is not None and _past(place, last, descending):
                continue  # a later read reaches it
            found.append(row)
        if last is None:
            break
        after = last
    return found[:count]


def _past(place: Candidate, mark: Candidate, descending: bool) -> bool:
    """Whether ``place`` comes strictly after ``mark`` in the order."""
    return place < mark if descending else place > mark
