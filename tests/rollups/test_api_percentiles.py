"""The percentiles API: values from merged sketches, budgets, shares, access, parameters."""

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from pytest_django import DjangoDbBlocker
from rest_framework.test import APIClient

from apps.pipelines.models import Stage
from apps.rollups.models import Measure, RollupBucket
from apps.rollups.selectors import pipeline_percentiles
from apps.rollups.sketches.ddsketch import Sketch
from apps.teams.services import ingest_token_create
from tests.builders.api import ApiWorld, api_world, error_of, session_client, token_client
from tests.builders.bucket_rows import HandTrace, nearest_rank, store_rollups
from tests.builders.configuration import make_stage
from tests.conftest import team_world
from tests.shared_rows import shared_rows
from tests.timing import MS

URL = "/api/v1/pipelines/rag-chat/percentiles"
PERCENTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
# Ragged on both sides, so that 10 s, minute and hour buckets are all merged.
FROM, TO = "2025-01-15T09:58:50Z", "2025-01-15T11:01:20Z"


def epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp())


@dataclass
class Traffic:
    api: ApiWorld
    rerank: Stage
    traces: list[HandTrace]
    theirs: list[HandTrace]

    def inside(self) -> list[HandTrace]:
        return [t for t in self.traces if epoch(FROM) <= t.start < epoch(TO)]


def hand_traces(api: ApiWorld, *, starts: list[int], seed: int = 4) -> list[HandTrace]:
    """Retrieval then generation in sequence, plus a little time in no stage."""
    rng = np.random.default_rng(seed)
    traces = []
    for index, start in enumerate(starts):
        retrieval = int(rng.lognormal(np.log(200), 0.5) * MS)
        generation = int(rng.lognormal(np.log(900), 0.15) * MS)
        untracked = int(rng.uniform(2, 20) * MS)
        traces.append(
            HandTrace(
                start=start,
                e2e_ns=retrieval + generation + untracked,
                # Retrieval overlaps an earlier span: its wall time exceeds its critical time.
                stages={
                    api.retrieval.pk: (retrieval + 3 * MS, retrieval),
                    api.generation.pk: (generation, generation),
                },
                error=index % 97 == 0,
            )
        )
    return traces


def _traffic() -> Traffic:
    """A world of its own (its names end in "-pct"), with traffic around the window."""
    api = api_world(team_world("-pct"))
    rerank = make_stage(api.pipeline, "rerank", name="Rerank", budget_ms=80)
    rng = np.random.default_rng(11)
    starts = sorted(int(s) for s in rng.integers(epoch(FROM) - 600, epoch(TO) + 600, 600))
    traces = hand_traces(api, starts=starts)
    store_rollups(api.pipeline, traces)
    # Another team's pipeline of the same slug, with traffic of its own.
    other = hand_traces(api, starts=starts[::30], seed=5)
    for trace in other:
        trace.stages = {}
    store_rollups(api.other_pipeline, other)
    return Traffic(api, rerank, traces, other)


@pytest.fixture(scope="module")
def _traffic_rows(django_db_setup: None, django_db_blocker: DjangoDbBlocker) -> Iterator[Traffic]:
    # Written once for the module's tests; what one changes (a budget, a corrupt sketch)
    # is undone after it.
    yield from shared_rows(django_db_blocker, _traffic)


@pytest.fixture
def traffic(db: None, clean_cache: None, _traffic_rows: Traffic) -> Traffic:
    # The ids are the same in every test: nothing one test left in the cache (the
    # accounts' request counts) may weigh on the next.
    return copy.deepcopy(_traffic_rows)


def get(client: APIClient, query: dict[str, Any] | None = None, url: str = URL) -> dict[str, Any]:
    response = client.get(url, query or {"from": FROM, "to": TO})
    assert response.status_code == 200, response.content
    return response.json()


def expected(values_ns: list[int]) -> dict[str, float]:
    values_ms = [v / MS for v in values_ns]
    sketch = Sketch.from_values(np.asarray(values_ms))
    return {p: round(sketch.quantile(q) or 0, 1) for p, q in PERCENTILES.items()}


def test_percentiles_equal_the_sketch_of_the_raw_values(traffic: Traffic) -> None:
    body = get(token_client(traffic.api.world.owner))
    inside = traffic.inside()
    e2e_values = [t.e2e_ns for t in inside]
    assert body["e2e"]["count"] == len(inside)
    assert body["e2e"]["errors"] == sum(t.error for t in inside)
    assert {p: body["e2e"][p] for p in PERCENTILES} == expected(e2e_values)
    assert body["e2e"]["max"] == round(max(e2e_values) / MS, 1)
    retrieval, generation, _ = body["stages"]
    walls = [t.stages[traffic.api.retrieval.pk][0] for t in inside]
    assert retrieval["count"] == len(inside)
    assert {p: retrieval[p] for p in PERCENTILES} == expected(walls)
    criticals = [t.stages[traffic.api.generation.pk][1] for t in inside]
    assert generation["critical_path"]["p95"] == expected(criticals)["p95"]
    assert generation["critical_path"]["mean_ms"] == round(sum(criticals) / len(criticals) / MS, 1)


def test_percentiles_are_within_1_percent_of_the_exact_nearest_rank(traffic: Traffic) -> None:
    body = get(token_client(traffic.api.world.viewer))
    inside = traffic.inside()
    for data, values_ns in [
        (body["e2e"], [t.e2e_ns for t in inside]),
        (body["stages"][0], [t.stages[traffic.api.retrieval.pk][0] for t in inside]),
        (body["stages"][1], [t.stages[traffic.api.generation.pk][0] for t in inside]),
    ]:
        for p, q in PERCENTILES.items():
            exact = nearest_rank([v / MS for v in values_ns], q)
            assert abs(data[p] - exact) <= 0.01 * exact + 0.05, (p, data[p], exact)


def test_the_response_has_the_documented_shape(traffic: Traffic) -> None:
    body = get(token_client(traffic.api.world.owner))
    assert body["pipeline"] == "rag-chat"
    assert (body["from"], body["to"]) == (FROM, TO)
    assert body["requested"] == {"from": FROM, "to": TO}
    assert body["widened"] == {"before_s": 0, "after_s": 0}
    assert set(body["e2e"]) == {
        "count", "errors", "p50", "p90", "p95", "p99", "max", "budget", "status",
    }  # fmt: skip
    assert [stage["slug"] for stage in body["stages"]] == ["retrieval", "generation", "rerank"]
    assert set(body["stages"][0]) == {
        "slug", "name", "count", "errors", "p50", "p90", "p95", "p99", "max", "budget",
        "status", "critical_path",
    }  # fmt: skip
    assert set(body["stages"][0]["critical_path"]) == {"share", "mean_ms", "p95"}
    assert set(body["untracked"]["critical_path"]) == {"share", "mean_ms"}
    assert body["e2e"]["budget"] == {"p95": 2500, "p99": 4000}
    assert body["stages"][1]["budget"] == {"p99": 1500}


def test_shares_plus_untracked_sum_to_1(traffic: Traffic) -> None:
    body = get(token_client(traffic.api.world.owner))
    shares = [stage["critical_path"]["share"] for stage in body["stages"]]
    untracked = body["untracked"]["critical_path"]["share"]
    assert sum(shares) + untracked == pytest.approx(1, abs=1e-5)
    inside = traffic.inside()
    e2e_total = sum(t.e2e_ns for t in inside)
    retrieval_total = sum(t.stages[traffic.api.retrieval.pk][1] for t in inside)
    assert shares[0] == round(retrieval_total / e2e_total, 6)
    assert shares[2] == 0
    assert body["untracked"]["critical_path"]["mean_ms"] == round(
        sum(t.untracked_ns for t in inside) / len(inside) / MS, 1
    )


def test_status_is_over_ok_or_no_data_per_budget(traffic: Traffic) -> None:
    body = get(token_client(traffic.api.world.owner))
    retrieval, generation, rerank = body["stages"]
    # Retrieval's p95 (about 450 ms) is over its 400 ms budget; generation's p99 is under 1500.
    assert retrieval["p95"] > 400
    assert retrieval["status"] == "over"
    assert generation["p99"] < 1500
    assert generation["status"] == "ok"
    assert body["e2e"]["status"] == "ok"
    assert rerank == {
        "slug": "rerank", "name": "Rerank", "count": 0, "errors": 0,
        "p50": None, "p90": None, "p95": None, "p99": None, "max": None,
        "budget": {"p95": 80}, "status": "no_data",
        "critical_path": {"share": 0.0, "mean_ms": None, "p95": None},
    }  # fmt: skip


def test_an_end_to_end_percentile_over_budget_makes_it_over(traffic: Traffic) -> None:
    traffic.api.pipeline.budget_p50_ms = 500
    traffic.api.pipeline.save()
    body = get(token_client(traffic.api.world.owner))
    assert body["e2e"]["p50"] > 500
    assert body["e2e"]["status"] == "over"


def test_a_pipeline_without_data_answers_no_data(api: ApiWorld) -> None:
    body = get(token_client(api.world.owner))
    assert body["e2e"] == {
        "count": 0, "errors": 0, "p50": None, "p90": None, "p95": None, "p99": None,
        "max": None, "budget": {"p95": 2500, "p99": 4000}, "status": "no_data",
    }  # fmt: skip
    assert [stage["status"] for stage in body["stages"]] == ["no_data", "no_data"]
    assert body["stages"][0]["critical_path"]["share"] is None
    assert body["untracked"] == {"critical_path": {"share": None, "mean_ms": None}}


def test_a_corrupt_stored_sketch_raises_the_decoders_error(traffic: Traffic) -> None:
    bucket = RollupBucket.objects.get(
        pipeline_id=traffic.api.pipeline.pk,
        stage_id=traffic.api.retrieval.pk,
        measure=Measure.WALL,
        resolution=3600,
        bucket_start=datetime(2025, 1, 15, 10, tzinfo=UTC),
    )
    bucket.sketch = bytes(bucket.sketch) + b"\x00"
    bucket.save()
    with pytest.raises(ValueError, match="sketch bytes have trailing data"):
        pipeline_percentiles(pipeline=traffic.api.pipeline, start=epoch(FROM), end=epoch(TO))


def test_a_window_reaching_past_the_kept_10s_buckets_is_widened(api: ApiWorld) -> None:
    start = epoch("2025-01-15T10:00:00Z")
    traces = hand_traces(api, starts=list(range(start - 3600, start + 3600, 7)))
    # 10-second buckets only from 10:30; the window starts at 10:10:20.
    store_rollups(api.pipeline, traces, keep=lambda r, s: r != 10 or s >= start + 1800)
    query = {"from": "2025-01-15T10:10:20Z", "to": "2025-01-15T10:40:30Z"}
    body = get(token_client(api.world.owner), query)
    assert body["from"] == "2025-01-15T10:10:00Z"
    assert body["to"] == "2025-01-15T10:40:30Z"
    assert body["widened"] == {"before_s": 20, "after_s": 0}
    assert body["requested"] == query
    inside = [t for t in traces if start + 600 <= t.start < start + 2430]
    assert body["e2e"]["count"] == len(inside)
    assert body["e2e"]["p95"] == expected([t.e2e_ns for t in inside])["p95"]


def test_named_windows_end_now(api: ApiWorld) -> None:
    now = int(datetime.now(tz=UTC).timestamp())
    # Well inside and well outside the last 15 minutes, so the clock moving is harmless.
    starts = [now - 14 * 60 + s for s in range(0, 12 * 60, 30)] + [now - 3600 + s for s in (0, 5)]
    store_rollups(api.pipeline, hand_traces(api, starts=starts))
    client = token_client(api.world.owner)
    assert get(client, {"window": "15m"})["e2e"]["count"] == 24
    assert get(client, {"window": "24h"})["e2e"]["count"] == 26
    body = get(client, {"window": "1h"})
    start, end = (datetime.fromisoformat(body[k]) for k in ("from", "to"))
    assert end - start == timedelta(hours=1)
    assert int(end.timestamp()) % 10 == 0


# --- Access --------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "editor", "viewer"])
def test_every_member_reads_percentiles_with_a_token(traffic: Traffic, role: str) -> None:
    body = get(token_client(getattr(traffic.api.world, role)))
    assert body["e2e"]["count"] == len(traffic.inside())


def test_a_browser_session_reads_too(traffic: Traffic) -> None:
    assert get(session_client(traffic.api.world.viewer))["e2e"]["count"] == len(traffic.inside())


def test_outsider_gets_404_for_another_teams_pipeline(traffic: Traffic) -> None:
    client = token_client(traffic.api.world.outsider)
    response = client.get(URL, {"team": traffic.api.world.team.slug, "from": FROM, "to": TO})
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_outsider_sees_only_their_own_pipeline_of_the_same_slug(traffic: Traffic) -> None:
    body = get(token_client(traffic.api.world.outsider))
    theirs = [t for t in traffic.theirs if epoch(FROM) <= t.start < epoch(TO)]
    assert 0 < body["e2e"]["count"] == len(theirs)
    assert [stage["slug"] for stage in body["stages"]] == ["retrieval"]


def test_an_unknown_pipeline_gets_404(traffic: Traffic) -> None:
    response = token_client(traffic.api.world.owner).get("/api/v1/pipelines/nope/percentiles")
    assert response.status_code == 404


def test_anonymous_gets_401(traffic: Traffic) -> None:
    response = APIClient().get(URL, {"from": FROM, "to": TO})
    assert response.status_code == 401
    assert error_of(response)["code"] == "not_authenticated"


def test_an_ingest_token_gets_401(traffic: Traffic) -> None:
    _, raw = ingest_token_create(team=traffic.api.world.team, name="otel", created_by=None)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    response = client.get(URL, {"from": FROM, "to": TO})
    assert response.status_code == 401
    assert "Ingest tokens can only send spans" in error_of(response)["message"]


def test_writes_are_not_allowed(traffic: Traffic) -> None:
    client = token_client(traffic.api.world.owner)
    rows = RollupBucket.objects.count()
    assert client.post(URL, {}, format="json").status_code == 405
    assert client.delete(URL).status_code == 405
    assert RollupBucket.objects.count() == rows


# --- Parameters ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({"window": "2h"}, "window", "not a valid choice"),
        ({"window": "1h", "from": FROM}, "window", "not both"),
        ({"from": "yesterday"}, "from", "wrong format"),
        ({"from": "2025-01-15T10:00:00"}, "from", "UTC offset"),
        ({"to": TO}, "from", "along with to"),
        ({"from": TO, "to": FROM}, "to", "after from"),
        ({"from": FROM, "to": "2025-01-15T09:58:55Z"}, "to", "after from"),
        ({"from": "2024-10-01T00:00:00Z", "to": TO}, "to", "90 days"),
        ({"from": "2025-13-45T00:00:00Z"}, "from", "wrong format"),
    ],
)
def test_bad_parameters_get_400_naming_the_field(
    api: ApiWorld, query: dict[str, str], field: str, message: str
) -> None:
    response = token_client(api.world.owner).get(URL, query)
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid"
    assert message in error["fields"][field][0], error


def test_an_offset_sent_unencoded_in_the_query_string_is_understood(traffic: Traffic) -> None:
    client = token_client(traffic.api.world.owner)
    url = f"{URL}?from=2025-01-15T10:58:50+01:00&to=2025-01-15T12:01:20+01:00"
    body = client.get(url).json()
    assert (body["from"], body["to"]) == (FROM, TO)
