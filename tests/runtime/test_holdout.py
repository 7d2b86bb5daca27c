"""The holdout: requests the client ran without levers. Analysis marks every stage
sample of a trace one of whose spans carries ``latency_budget.holdout=true``; the
runtime document gives each stage's times over those samples alone (``uncut``), exact
nearest-rank percentiles of known values, beside the cut ``observed`` ones."""

from typing import Any

import numpy as np
import pytest
from django.test import Client

from apps.analysis.models import StageSample
from apps.teams.services import metrics_token_create
from tests.builders.bucket_rows import nearest_rank
from tests.builders.ingested_traces import ingest, make_rag_pipeline, now_ns
from tests.builders.recompute_traces import rollups_settle
from tests.builders.spans import AUTH, RETR_A, ROOT, HandSpan, span
from tests.conftest import TeamWorld, client_for
from tests.timing import MS

pytestmark = pytest.mark.django_db
HOLDOUT = "latency_budget.holdout"


def request(
    trace_id: int, t0: int, retrieval_ms: int, *, holdout: Any = None, on_root: bool = False
) -> list[HandSpan]:
    """Auth 0-50 ms, then one retrieval of ``retrieval_ms``; the holdout mark on the
    client's request span (a child of the server's root) unless ``on_root``."""
    mark = {} if holdout is None else {HOLDOUT: holdout}
    end = t0 + (60 + retrieval_ms) * MS
    return [
        span(ROOT, None, t0, end, name="POST /chat", kind="server", trace_id=trace_id,
             attributes=mark if on_root else {}),
        span(0x11, ROOT, t0, end, name="request rag-chat", trace_id=trace_id,
             attributes={} if on_root else mark),
        span(AUTH, 0x11, t0, t0 + 50 * MS, name="auth.check", trace_id=trace_id),
        span(RETR_A, 0x11, t0 + 50 * MS, t0 + (50 + retrieval_ms) * MS, name="vector.search",
             trace_id=trace_id),
    ]  # fmt: skip


def holdout_of_samples(stage_id: int) -> dict[int, bool]:
    rows = StageSample.objects.filter(stage_id=stage_id).values_list("trace_pk", "holdout")
    return dict(rows)


def test_a_true_mark_on_any_span_puts_every_stage_sample_of_the_trace_in_the_holdout(
    world: TeamWorld,
) -> None:
    pipeline = make_rag_pipeline(world.team)
    t0 = now_ns() - 120_000 * MS
    ingest(
        world.team,
        request(0x1, t0, 100, holdout=True),
        request(0x2, t0 + 1000 * MS, 100, holdout=True, on_root=True),
        request(0x3, t0 + 2000 * MS, 100),
        # Not the protocol: only a boolean true counts.
        request(0x4, t0 + 3000 * MS, 100, holdout="true"),
        request(0x5, t0 + 4000 * MS, 100, holdout=1),
        request(0x6, t0 + 5000 * MS, 100, holdout=False),
    )
    by_start = dict(
        StageSample.objects.filter(pipeline_id=pipeline.pk)
        .order_by("start_ns", "stage_id")
        .values_list("start_ns", "holdout")
        .distinct()
    )
    assert list(by_start.values()) == [True, True, False, False, False, False]
    # Both stages of a holdout trace are marked.
    marked = StageSample.objects.filter(pipeline_id=pipeline.pk, holdout=True)
    assert sorted(marked.values_list("stage_id", flat=True)) == sorted(
        [s.pk for s in pipeline.stages.filter(slug__in=["auth", "retrieval"])] * 2
    )


def document(team: Any) -> dict[str, Any]:
    _, token = metrics_token_create(team=team, name="app", created_by=None)
    response = Client().get("/v1/budgets/rag-chat", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    result: dict[str, Any] = response.json()
    return result


def test_the_document_gives_each_stages_uncut_times_from_the_holdout_alone(
    world: TeamWorld, settings: Any
) -> None:
    settings.RUNTIME_DOCUMENT_CACHE_SECONDS = 0
    settings.RUNTIME_HOLDOUT_PERCENT = 5.0
    make_rag_pipeline(world.team)
    rng = np.random.default_rng(11)
    t0 = now_ns() - 600_000 * MS
    # The levers cut retrieval at 150 ms in the ordinary requests; the holdout's run whole.
    uncut = [int(v) for v in rng.lognormal(np.log(140), 0.6, size=60)]
    cut = [min(int(v), 150) for v in rng.lognormal(np.log(140), 0.6, size=90)]
    traces = [
        request(0x100 + n, t0 + n * 1000 * MS, ms, holdout=True) for n, ms in enumerate(uncut)
    ] + [
        request(0x400 + n, t0 + (n * 1000 + 500) * MS, ms) for n, ms in enumerate(cut)
    ]  # fmt: skip
    ingest(world.team, *traces)
    rollups_settle()

    doc = document(world.team)
    assert doc["holdout_percent"] == 5.0
    stages = {stage["stage"]: stage for stage in doc["stages"]}
    retrieval = stages["retrieval"]
    assert retrieval["uncut"]["window_s"] == 3600
    assert retrieval["uncut"]["count"] == len(uncut)
    for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        assert retrieval["uncut"][name] == pytest.approx(nearest_rank(uncut, q), abs=0.001)
    # The observed figures count every request, the cut ones capping the tail.
    assert retrieval["observed"]["count"] == len(uncut) + len(cut)
    assert retrieval["uncut"]["p99"] > retrieval["observed"]["p95"]
    assert stages["auth"]["uncut"]["count"] == len(uncut)
    assert stages["auth"]["uncut"]["p50"] == pytest.approx(50.0)
    # A stage no holdout request reached has a count of 0 and no figures.
    assert stages["ttft"]["uncut"] == {
        "window_s": 3600, "count": 0, "p50": None, "p95": None, "p99": None,
    }  # fmt: skip


def test_holdout_samples_older_than_the_uncut_window_are_left_out(
    world: TeamWorld, settings: Any
) -> None:
    settings.RUNTIME_DOCUMENT_CACHE_SECONDS = 0
    settings.RUNTIME_UNCUT_WINDOW_SECONDS = 600
    make_rag_pipeline(world.team)
    now = now_ns()
    ingest(
        world.team,
        request(0x1, now - 900_000 * MS, 900, holdout=True),
        request(0x2, now - 300_000 * MS, 120, holdout=True),
    )
    retrieval = {s["stage"]: s for s in document(world.team)["stages"]}["retrieval"]
    assert retrieval["uncut"]["count"] == 1
    assert retrieval["uncut"]["p99"] == pytest.approx(120.0)


def test_the_read_stops_at_the_newest_samples_past_its_cap(world: TeamWorld) -> None:
    from apps.analysis.selectors.holdout import holdout_stage_times

    pipeline = make_rag_pipeline(world.team)
    t0 = now_ns() - 60_000 * MS
    ingest(
        world.team,
        *(request(0x10 + n, t0 + n * 1000 * MS, 100 + n, holdout=True) for n in range(5)),
    )
    retrieval = pipeline.stages.get(slug="retrieval")
    times = holdout_stage_times(
        pipeline_id=pipeline.pk, start_ns=t0 - MS, end_ns=t0 + 60_000 * MS, limit=4
    )
    # Four rows over both stages, newest first: the last two requests' two stages.
    assert times[retrieval.pk].count == 2
    assert times[retrieval.pk].percentiles["p99"] == pytest.approx(104.0)


# The levers' effect measured on the pages ----------------------------------------------


def cohort_cells(html: str, cohort: str) -> list[str]:
    """The text of the cells of one row of the holdout table."""
    row = html.split(f'data-cohort="{cohort}"', 1)[1].split("</tr>", 1)[0]
    cells = [cell.split(">", 1)[1] for cell in row.split("<td")[1:]]
    return [cell.split("</td>", 1)[0].strip() for cell in cells]


def test_the_pipeline_page_sets_the_holdout_beside_every_request(world: TeamWorld) -> None:
    pipeline = make_rag_pipeline(world.team)
    pipeline.objective_target = 99
    pipeline.objective_threshold_ms = 250
    pipeline.save()
    t0 = now_ns() - 600_000 * MS
    # Ten held-out requests of 160 to 340 ms (retrieval 100 to 280, auth and 60 ms more),
    # thirty with their retrieval capped at 150 ms (210 ms end to end).
    held = [100 + 20 * n for n in range(10)]
    ingest(
        world.team,
        *(request(0x100 + n, t0 + n * 1000 * MS, ms, holdout=True) for n, ms in enumerate(held)),
        *(request(0x400 + n, t0 + (n * 1000 + 500) * MS, 150) for n in range(30)),
    )
    rollups_settle()
    page = client_for(world.viewer).get(
        f"/teams/{world.team.slug}/dashboards/{pipeline.slug}/?window=1h"
    )
    assert page.status_code == 200
    html = page.text
    e2e = [60 + ms for ms in held]
    holdout = cohort_cells(html, "holdout")
    assert holdout[1] == "10"
    assert holdout[2] == f"{nearest_rank(e2e, 0.95):.0f} ms"
    assert holdout[3] == f"{nearest_rank(e2e, 0.99):.0f} ms"
    # Within 250 ms: 160 … 240, five of ten.
    assert holdout[4] == "50.0 %"
    everyone = cohort_cells(html, "everyone")
    assert everyone[1] == "40"
    # Thirty capped at 210 ms and the holdout's five: 35 of 40.
    assert everyone[4] == "87.5 %"
    assert "25.0 % of this range" in html

    stage = pipeline.stages.get(slug="retrieval")
    stage_page = client_for(world.viewer).get(
        f"/teams/{world.team.slug}/dashboards/{pipeline.slug}/stages/{stage.slug}/?window=1h"
    )
    assert stage_page.status_code == 200
    cells = cohort_cells(stage_page.text, "holdout")
    assert cells[1:] == ["10", f"{nearest_rank(held, 0.95):.0f} ms",
                         f"{nearest_rank(held, 0.99):.0f} ms"]  # fmt: skip
    # The outsider sees neither page.
    outsider = client_for(world.outsider)
    assert outsider.get(f"/teams/{world.team.slug}/dashboards/{pipeline.slug}/").status_code == 404


def test_without_a_holdout_request_the_comparison_is_left_out(world: TeamWorld) -> None:
    pipeline = make_rag_pipeline(world.team)
    ingest(world.team, request(0x1, now_ns() - 60_000 * MS, 100))
    rollups_settle()
    html = (
        client_for(world.owner)
        .get(f"/teams/{world.team.slug}/dashboards/{pipeline.slug}/?window=1h")
        .text
    )
    assert 'data-role="holdout"' not in html
