"""The series API: points per step from merged buckets, never more than asked for."""

import copy
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import numpy as np
import pytest
import yaml
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st
from pytest_django import DjangoDbBlocker
from rest_framework.test import APIClient

from apps.rollups.models import E2E_STAGE_ID, Measure, RollupBucket
from apps.rollups.selectors.series import pipeline_series, point_count, series_step
from apps.rollups.sketches.ddsketch import Sketch
from apps.teams.services import ingest_token_create
from tests.builders.api import ApiWorld, api_world, error_of, session_client, token_client
from tests.builders.bucket_rows import HandTrace, store_rollups
from tests.conftest import team_world
from tests.rollups.test_api_percentiles import epoch, hand_traces
from tests.shared_rows import shared_rows
from tests.timing import DAY_S as DAY
from tests.timing import HOUR_S as HOUR
from tests.timing import MS

URL = "/api/v1/pipelines/rag-chat/series"
# Every resolution kept for the six hours of traffic.
START = epoch("2025-01-15T06:00:00Z")
END = START + 6 * HOUR


class SixHours(NamedTuple):
    """A world of its own (its names end in "-series") with six hours of traffic."""

    api: ApiWorld
    traces: list[HandTrace]


def _six_hours() -> SixHours:
    api = api_world(team_world("-series"))
    rng = np.random.default_rng(3)
    # Half an hour without traffic, from 08:00, for points without data.
    starts = sorted(
        int(s)
        for s in rng.integers(START, END, 1200)
        if not START + 2 * HOUR <= s < START + 2 * HOUR + 1800
    )
    made = hand_traces(api, starts=starts)
    store_rollups(api.pipeline, made)
    return SixHours(api, made)


@pytest.fixture(scope="module")
def _six_hours_rows(
    django_db_setup: None, django_db_blocker: DjangoDbBlocker
) -> Iterator[SixHours]:
    # Written once for the module: the tests read them (the one that corrupts a bucket
    # does it in its own savepoint, undone after it).
    yield from shared_rows(django_db_blocker, _six_hours)


@pytest.fixture
def six_hours(db: None, clean_cache: None, _six_hours_rows: SixHours) -> SixHours:
    # The ids are the same in every test: nothing one test left in the cache (the
    # accounts' request counts) may weigh on the next.
    return copy.deepcopy(_six_hours_rows)


def get(client: APIClient, **query: Any) -> dict[str, Any]:
    response = client.get(URL, query)
    assert response.status_code == 200, response.content
    return response.json()


def p95_of(values_ns: list[int]) -> float:
    sketch = Sketch.from_values(np.asarray(values_ns, dtype=np.float64) / MS)
    return round(sketch.quantile(0.95) or 0, 1)


def test_each_point_is_the_percentile_of_its_steps_samples(six_hours: SixHours) -> None:
    api, traces = six_hours
    body = get(
        token_client(api.world.viewer),
        **{"from": "2025-01-15T06:00:00Z", "to": "2025-01-15T12:00:00Z", "step": "15m"},
    )
    assert body["step_s"] == 900
    assert body["resolution_s"] == 10
    assert len(body["points"]) == 24
    for point in body["points"]:
        start = epoch(point["t"])
        inside = [t.e2e_ns for t in traces if start <= t.start < start + 900]
        assert point["count"] == len(inside)
        assert point["value"] == (p95_of(inside) if inside else None)
    assert body["points"][8] == {"t": "2025-01-15T08:00:00Z", "value": None, "count": 0}


def test_a_stages_critical_path_series(six_hours: SixHours) -> None:
    api, traces = six_hours
    body = get(
        token_client(api.world.owner),
        **{"from": "2025-01-15T06:00:00Z", "to": "2025-01-15T12:00:00Z"},
        stage="retrieval",
        measure="critical",
        p="95",
        step="1h",
    )
    assert (body["stage"], body["measure"], body["p"]) == ("retrieval", "critical", 95)
    first = [t.stages[api.retrieval.pk][1] for t in traces if t.start < START + HOUR]
    assert body["points"][0]["value"] == p95_of(first)


def test_a_corrupt_stored_sketch_raises_the_decoders_error(six_hours: SixHours) -> None:
    api = six_hours.api
    bucket = RollupBucket.objects.filter(
        pipeline_id=api.pipeline.pk, stage_id=E2E_STAGE_ID, resolution=60
    ).earliest("bucket_start")
    bucket.sketch = bytes(bucket.sketch)[:-1]
    bucket.save()
    with pytest.raises(ValueError, match=r"^sketch ") as one_by_one:
        Sketch.from_bytes(bucket.sketch)
    with pytest.raises(ValueError, match=f"^{re.escape(str(one_by_one.value))}$"):
        pipeline_series(
            pipeline=api.pipeline,
            stage_id=E2E_STAGE_ID,
            measure=Measure.WALL,
            quantile=0.95,
            start=START,
            end=END,
        )


@pytest.mark.parametrize(
    ("query", "max_points"),
    [
        ({"step": "10s"}, 120),
        ({"step": "10s", "max_points": "500"}, 500),
        ({"step": "1m", "max_points": "10"}, 10),
        ({}, 120),
        ({"max_points": "37"}, 37),
        ({"step": "7m", "max_points": "13"}, 13),
    ],
)
def test_never_more_points_than_asked_for(
    six_hours: SixHours, query: dict[str, str], max_points: int
) -> None:
    api, traces = six_hours
    body = get(
        token_client(api.world.owner),
        **{"from": "2025-01-15T06:00:00Z", "to": "2025-01-15T12:00:00Z", **query},
    )
    assert 0 < len(body["points"]) <= max_points
    assert sum(point["count"] for point in body["points"]) == len(traces)


def test_without_a_step_the_series_has_at_most_120_points(api: ApiWorld) -> None:
    body = get(token_client(api.world.owner), window="7d")
    assert len(body["points"]) <= 120
    assert body["step_s"] % body["resolution_s"] == 0


def test_the_step_is_rounded_up_to_a_multiple_of_the_finest_kept_resolution(
    api: ApiWorld,
) -> None:
    starts = list(range(START, END, 60))
    # 10-second buckets only for the last hour: the window needs minutes.
    store_rollups(
        api.pipeline, hand_traces(api, starts=starts), keep=lambda r, s: r != 10 or s >= END - HOUR
    )
    client = token_client(api.world.owner)
    window = {"from": "2025-01-15T09:00:20Z", "to": "2025-01-15T12:00:00Z"}
    body = get(client, **window, step="90s", max_points="1000")
    assert (body["resolution_s"], body["step_s"]) == (60, 120)
    assert body["from"] == "2025-01-15T09:00:00Z"
    assert body["widened"] == {"before_s": 20, "after_s": 0}
    recent = get(
        client, **{"from": "2025-01-15T11:30:00Z", "to": "2025-01-15T12:00:00Z"}, step="45"
    )
    assert (recent["resolution_s"], recent["step_s"]) == (10, 50)


@settings(max_examples=300, deadline=None)
@given(
    start=st.integers(min_value=0, max_value=90 * DAY // 10),
    length=st.integers(min_value=1, max_value=90 * DAY // 10),
    resolution=st.sampled_from([10, 60, 3600, 86400]),
    requested=st.one_of(st.none(), st.integers(min_value=10, max_value=10 * DAY)),
    max_points=st.integers(min_value=10, max_value=1440),
)
def test_the_chosen_step_fits_the_points_and_the_resolution(
    start: int, length: int, resolution: int, requested: int | None, max_points: int
) -> None:
    low = (1_700_000_000 + start * 10) // resolution * resolution
    high = -(-(low + length * 10) // resolution) * resolution
    step = series_step(
        start=low, end=high, resolution=resolution, requested=requested, max_points=max_points
    )
    assert step % resolution == 0
    assert step >= (requested or resolution)
    assert point_count(start=low, end=high, step=step) <= max_points


# --- Access and parameters -----------------------------------------------------------------


def test_members_and_sessions_read_series(six_hours: SixHours) -> None:
    api, traces = six_hours
    window = {"from": "2025-01-15T06:00:00Z", "to": "2025-01-15T12:00:00Z"}
    for client in (token_client(api.world.editor), session_client(api.world.viewer)):
        assert sum(p["count"] for p in get(client, **window)["points"]) == len(traces)


def test_outsider_gets_404_and_anonymous_401(api: ApiWorld) -> None:
    response = token_client(api.world.outsider).get(URL, {"team": "acme"})
    assert response.status_code == 404
    assert APIClient().get(URL).status_code == 401


def test_an_ingest_token_gets_401(api: ApiWorld) -> None:
    _, raw = ingest_token_create(team=api.world.team, name="otel", created_by=None)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    response = client.get(URL)
    assert response.status_code == 401
    assert "Ingest tokens" in error_of(response)["message"]


def test_outsider_reads_their_own_pipeline_of_the_same_slug(six_hours: SixHours) -> None:
    api = six_hours.api
    body = get(token_client(api.world.outsider), window="1h", stage="retrieval")
    assert all(point["count"] == 0 for point in body["points"])


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({"stage": "nope"}, "stage", "no stage"),
        ({"measure": "cpu"}, "measure", "not a valid choice"),
        ({"measure": "critical"}, "measure", "use wall"),
        ({"p": "42"}, "p", "not a valid choice"),
        ({"step": "soon"}, "step", "duration"),
        ({"step": "5s"}, "step", "between 10 seconds"),
        ({"step": "100d"}, "step", "between 10 seconds"),
        ({"max_points": "5"}, "max_points", "greater than or equal to 10"),
        ({"max_points": "100000"}, "max_points", "less than or equal to 1440"),
        ({"window": "2h"}, "window", "not a valid choice"),
        ({"from": "2025-01-15T12:00:00Z", "to": "2025-01-15T11:00:00Z"}, "to", "after from"),
    ],
)
def test_bad_parameters_get_400_naming_the_field(
    api: ApiWorld, query: dict[str, str], field: str, message: str
) -> None:
    response = token_client(api.world.owner).get(URL, query)
    assert response.status_code == 400
    error = error_of(response)
    assert message in error["fields"][field][0], error


def test_both_endpoints_are_in_the_schema_with_examples(db: None) -> None:
    schema = yaml.safe_load(Client().get("/api/schema/").content)
    for path, parameters in [
        ("/api/v1/pipelines/{pipeline_slug}/percentiles", {"window", "from", "to", "team"}),
        (
            "/api/v1/pipelines/{pipeline_slug}/series",
            {"window", "from", "to", "stage", "measure", "p", "step", "max_points"},
        ),
    ]:
        operation = schema["paths"][path]["get"]
        assert parameters <= {p["name"] for p in operation["parameters"]}
        content = operation["responses"]["200"]["content"]["application/json"]
        assert content["examples"]
        assert {"401", "404", "400"} <= set(operation["responses"])


def test_times_are_rfc_3339_utc(api: ApiWorld) -> None:
    body = get(token_client(api.world.owner), window="15m")
    for text in (body["from"], body["to"], body["points"][0]["t"]):
        assert text.endswith("Z")
        assert datetime.fromisoformat(text).utcoffset() == timedelta(0)
