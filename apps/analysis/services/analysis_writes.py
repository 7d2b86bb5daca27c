"""What trace analysis writes: stage samples replaced, traces updated, buckets marked dirty.

Thousands of traces per pass: samples go in by binary COPY and the traces by one
UPDATE from arrays, without per-row ORM work.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection

from apps.analysis.degradations import DEGRADATION_COLUMNS, DEGRADATION_TYPES, DegradationRow
from apps.analysis.models import Degradation, StageSample
from apps.analysis.services.dirty_buckets import dirty_buckets_mark
from apps.analysis.services.served_models import ModelKey, served_model_ids
from apps.core.sql_arrays import array_literal
from apps.ingest.models import Trace
from apps.ingest.span_store import SearchSet, span_store

SAMPLE_COLUMNS = (
    "trace_pk", "stage_id", "start_ns", "team_id", "pipeline_id", "wall_ns", "critical_ns",
    "span_count", "error", "holdout", "model_id", "output_tokens", "generation_ns",
    "max_gap_ns",
)  # fmt: skip
# A stage sample as a row in SAMPLE_COLUMNS order: model instances cost more than the COPY.
# Analysis leaves the model (at 10) as its (provider, name); the write makes it an id.
SampleRow = tuple[
    int, int, int, int, int, int, int, int, bool, bool,
    "tuple[str, str] | int | None", int | None, int | None, int | None,
]  # fmt: skip
SAMPLE_TYPES = (
    "int8", "int8", "int8", "int8", "int8", "int8", "int8", "int4", "bool", "bool",
    "int8", "int4", "int8", "int8",
)  # fmt: skip


def _samples_delete(refinalized: list[tuple[int, int | None]]) -> None:
    """Delete the samples and ledger rows of traces finalized before, found by their
    partition key too.

    A first finalization has nothing to delete, and naming the old start times lets
    PostgreSQL look in their day partitions only, not in a month of them.
    """
    if not refinalized:
        return
    trace_pks = [pk for pk, _ in refinalized]
    starts = sorted({start for _, start in refinalized if start is not None})
    params = [array_literal(trace_pks), array_literal(starts)]
    with connection.cursor() as cursor:
        for table in (StageSample._meta.db_table, Degradation._meta.db_table):
            cursor.execute(
                f"DELETE FROM {table} "
                "WHERE trace_pk = ANY(%s::bigint[]) AND start_ns = ANY(%s::bigint[])",
                params,
            )


def _rows_copy(
    table: str, columns: Sequence[str], types: Sequence[str], rows: Sequence[tuple[Any, ...]]
) -> None:
    """Binary COPY: thousands of rows per pass, without per-row ORM work."""
    if not rows:
        return
    with connection.cursor() as django_cursor:
        cursor = django_cursor.cursor
        with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(list(types))
            for row in rows:
                copy.write_row(row)


def _with_model_ids(samples: list[SampleRow]) -> list[SampleRow]:
    """The rows with each model's (provider, name) replaced by its ServedModel id."""
    keys: set[ModelKey] = set()
    for row in samples:
        model = row[10]
        if isinstance(model, tuple):
            keys.add((row[3], *model))
    if not keys:
        return samples
    ids = served_model_ids(keys)
    rows: list[SampleRow] = []
    for row in samples:
        model = row[10]
        if isinstance(model, tuple):
            row = (*row[:10], ids.get((row[3], *model)), *row[11:])
        rows.append(row)
    return rows


def _traces_update(traces: list[Trace], now: datetime) -> None:
    """One UPDATE … FROM unnest(arrays) instead of the ORM's CASE per field and row."""
    numbers: dict[str, tuple[str, list[int | bool | None]]] = {
        "id": ("bigint", [t.pk for t in traces]),
        "state": ("smallint", [t.state for t in traces]),
        "revision": ("int", [t.revision for t in traces]),
        "pipeline_id": ("bigint", [t.pipeline_id for t in traces]),
        "incomplete": ("bool", [t.incomplete for t in traces]),
        "error": ("bool", [t.error for t in traces]),
        "start_ns": ("bigint", [t.start_ns for t in traces]),
        "end_ns": ("bigint", [t.end_ns for t in traces]),
        "untracked": ("bigint", [t.untracked_critical_ns for t in traces]),
    }
    arrays = ", ".join(f"%s::{sql_type}[]" for sql_type, _ in numbers.values())
    params: list[Any] = [array_literal(values) for _, values in numbers.values()]
    params += [[t.root_name for t in traces], [t.root_service for t in traces]]
    # The search sets as one flat array and each trace's slice of it: an array of arrays
    # cannot be unnested by row, and a literal per trace costs PostgreSQL a parse each.
    flat: list[int] = []
    first: list[int | None] = []
    last: list[int | None] = []
    for t in traces:
        hashes = t.search_hashes
        if hashes is None:
            first.append(None)
            last.append(None)
        else:
            first.append(len(flat) + 1)
            flat.extend(hashes)
            last.append(len(flat))
    # Integers only: written directly, where ``array_literal`` tests each value's type.
    params += [array_literal(first), array_literal(last), f"{{{','.join(map(str, flat))}}}", now]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {Trace._meta.db_table} AS t SET
                state = v.state, finalized_at = %s,
                revision = v.revision, pipeline_id = v.pipeline_id,
                incomplete = v.incomplete, error = v.error, start_ns = v.start_ns,
                end_ns = v.end_ns, root_name = v.root_name, root_service = v.root_service,
                untracked_critical_ns = v.untracked,
                search_hashes = CASE WHEN v.first IS NOT NULL
                    THEN coalesce((%s::bigint[])[v.first:v.last], '{{}}') END
            FROM unnest({arrays}, %s::text[], %s::text[], %s::int[], %s::int[])
                AS v({", ".join(numbers)}, root_name, root_service, first, last)
            WHERE t.id = v.id
            """,
            [params[-1], params[-2], *params[:-2]],
        )


def _search_sets_keep(traces: list[Trace]) -> None:
    """Where the span store keeps the search sets, the new ones go there before the
    trace rows that hold them commit (a store away fails the pass, which is redone)."""
    store = span_store()
    if not store.keeps_search_sets:
        return
    store.search_sets_write(
        [
            SearchSet(t.team_id, t.pk, t.start_ns, t.end_ns - t.start_ns, t.search_hashes)
            for t in traces
            if t.search_hashes and t.start_ns is not None and t.end_ns is not None
        ]
    )


def analyzed_write(
    group: Sequence[tuple[Trace, list[SampleRow], list[DegradationRow]]],
    before: dict[int, tuple[int, int | None, int | None]],
    now: datetime,
) -> None:
    """Replace the samples and ledger rows of these analyzed traces and store what
    analysis found."""
    traces = [trace for trace, _, _ in group]
    samples = [row for _, rows, _ in group for row in rows]
    degradations = [row for _, _, rows in group for row in rows]
    seen = [before[t.pk] for t in traces if before[t.pk][0]]
    # A trace finalized before may have counted in another pipeline or bucket.
    refinalized = [(t.pk, before[t.pk][2]) for t in traces if before[t.pk][0]]
    touched: set[tuple[int | None, int | None]] = {(pipeline, start) for _, pipeline, start in seen}
    touched |= {(t.pipeline_id, t.start_ns) for t in traces if not t.incomplete}
    _samples_delete(refinalized)
    _rows_copy(StageSample._meta.db_table, SAMPLE_COLUMNS, SAMPLE_TYPES, _with_model_ids(samples))
    _rows_copy(Degradation._meta.db_table, DEGRADATION_COLUMNS, DEGRADATION_TYPES, degradations)
    _search_sets_keep(traces)
    _traces_update(traces, now)
    dirty_buckets_mark(touched)
