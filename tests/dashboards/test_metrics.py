"""/metrics through the test client: the exposition parsed by prometheus_client's own
parsers and checked against exact computation, the refusals, one team's series only,
the cache and the allowances."""

import copy
import gzip
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from prometheus_client.core import Metric
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families
from pytest_django import DjangoDbBlocker

from apps.teams.services import (
    api_token_create,
    ingest_token_create,
    metrics_token_create,
    metrics_token_revoke,
)
from tests.builders.configuration import make_pipeline, make_stage
from tests.conftest import team_world
from tests.dashboards.metrics_world import (
    OBJECTIVE_MS,
    QUANTILES,
    MetricsWorld,
    build_metrics_world,
    sketch_seconds,
)
from tests.shared_rows import SharedRows
from tests.timing import MS

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as HttpResponse
else:
    from django.http import HttpResponse

URL = "/metrics"
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

pytestmark = pytest.mark.usefixtures("clean_cache", "allowance_clock")


# The world's traffic sits in bands that stay inside or outside each window for a minute
# after it was written (tests/dashboards/metrics_world.py): written once for the module,
# it is written again if the module has run for this long (on a very busy machine).
FRESH_S = 30


@pytest.fixture(scope="module")
def _metrics_rows(
    django_db_setup: None, django_db_blocker: DjangoDbBlocker
) -> Iterator[SharedRows[MetricsWorld]]:
    # ``world``'s own names: no test here makes a world of its own.
    rows = SharedRows(
        django_db_blocker,
        lambda: build_metrics_world(team_world()),
        stale=lambda built: time.time() - built.now > FRESH_S,
    )
    yield rows
    rows.close()


@pytest.fixture
def _metrics_world(_metrics_rows: SharedRows[MetricsWorld]) -> MetricsWorld:
    return _metrics_rows.get()  # before ``db`` opens the test's savepoint


@pytest.fixture
def mw(_metrics_world: MetricsWorld, db: None) -> MetricsWorld:
    # What a test changes (a token revoked, a pipeline or stage added) is undone after it.
    return copy.deepcopy(_metrics_world)


def scrape(token: str | None, **headers: str) -> HttpResponse:
    if token is not None:
        headers.setdefault("Authorization", f"Bearer {token}")
    return Client(headers=headers).get(URL)


def text_of(response: HttpResponse) -> str:
    body = response.content
    if response.get("Content-Encoding") == "gzip":
        body = gzip.decompress(body)
    return body.decode()


def families(token: str) -> dict[str, Metric]:
    response = scrape(token)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return {f.name: f for f in text_string_to_metric_families(text_of(response))}


def samples(found: Iterable[Metric]) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value for family in found for s in family.samples
    }


def value(found: Samples, name: str, **labels: str) -> float:
    labels.setdefault("team", "acme")
    return found[(name, frozenset(labels.items()))]


def test_the_scrape_parses_and_every_family_has_help_and_type(mw: MetricsWorld) -> None:
    response = scrape(mw.token)
    text = text_of(response)
    found = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(found) == {
        "latency_budget_pipeline_info", "latency_budget_pipeline_budget_seconds",
        "latency_budget_pipeline_duration_seconds",
        "latency_budget_pipeline_untracked_critical_path_ratio",
        "latency_budget_pipeline_traces", "latency_budget_pipeline_trace_errors",
        "latency_budget_pipeline_violations_open", "latency_budget_pipeline_objective_target_ratio",
        "latency_budget_pipeline_objective_threshold_seconds",
        "latency_budget_pipeline_traces_within_objective", "latency_budget_stage_info",
        "latency_budget_stage_budget_seconds", "latency_budget_stage_duration_seconds",
        "latency_budget_stage_critical_path_ratio", "latency_budget_stage_samples",
        "latency_budget_stage_violations_open", "latency_budget_scrape_omitted",
        "latency_budget_scrape_computed_timestamp_seconds",
    }  # fmt: skip
    for family in found.values():
        assert family.documentation, family.name
        assert family.type in {"gauge", "counter"}, family.name
        counter = family.type == "counter"
        assert all(s.name.endswith("_total") == counter for s in family.samples), family.name
    assert text.count("# HELP ") == text.count("# TYPE ") == len(found)


def test_values_equal_exact_computation(mw: MetricsWorld) -> None:
    found = samples(families(mw.token).values())
    pipe = {"pipeline": "rag-chat"}
    assert value(found, "latency_budget_pipeline_budget_seconds", **pipe, quantile="0.95") == 2.5
    assert value(found, "latency_budget_pipeline_budget_seconds", **pipe, quantile="0.99") == 4.0
    assert value(
        found, "latency_budget_stage_budget_seconds", **pipe, stage="generation", quantile="0.99"
    ) == 1.5  # fmt: skip
    for window, seconds in {"5m": 300, "1h": 3600}.items():
        inside = mw.recent(seconds)
        assert 0 < len(inside) < len(mw.traces)
        for quantile, q in QUANTILES.items():
            labels = {**pipe, "quantile": quantile, "window": window}
            assert value(found, "latency_budget_pipeline_duration_seconds", **labels) == (
                sketch_seconds([t.e2e_ns for t in inside], q)
            )
            walls = [t.stages[mw.retrieval.pk][0] for t in inside]
            stage_p = value(
                found, "latency_budget_stage_duration_seconds", **labels, stage="retrieval"
            )
            assert stage_p == sketch_seconds(walls, q)
        e2e_total = sum(t.e2e_ns for t in inside)
        generation = sum(t.stages[mw.generation.pk][1] for t in inside)
        share = value(
            found, "latency_budget_stage_critical_path_ratio", **pipe, stage="generation",
            window=window,
        )  # fmt: skip
        assert share == round(generation / e2e_total, 6)
    # Counts since the pipeline began include the traces of two days ago.
    assert value(found, "latency_budget_pipeline_traces_total", **pipe) == len(mw.traces)
    assert value(found, "latency_budget_pipeline_trace_errors_total", **pipe) == sum(
        t.error for t in mw.traces
    )
    within = sum(t.e2e_ns <= OBJECTIVE_MS * MS for t in mw.traces)
    assert 0 < within < len(mw.traces)
    assert value(found, "latency_budget_pipeline_traces_within_objective_total", **pipe) == within
    assert value(found, "latency_budget_pipeline_objective_target_ratio", **pipe) == 0.99
    assert value(found, "latency_budget_pipeline_objective_threshold_seconds", **pipe) == 1.6
    assert value(
        found, "latency_budget_stage_samples_total", **pipe, stage="retrieval"
    ) == len(mw.traces)  # fmt: skip


def test_violations_open_are_1_and_budgets_without_one_0(mw: MetricsWorld) -> None:
    found = samples(families(mw.token).values())
    stages = {
        dict(labels)["stage"]: v
        for (name, labels), v in found.items()
        if name == "latency_budget_stage_violations_open"
    }
    assert stages == {"retrieval": 1, "generation": 0, "rerank": 0}
    ends = {
        (dict(labels)["pipeline"], dict(labels)["quantile"]): v
        for (name, labels), v in found.items()
        if name == "latency_budget_pipeline_violations_open"
    }
    # The p99 violation closed an hour ago.
    assert ends == {("rag-chat", "0.95"): 0, ("rag-chat", "0.99"): 0, ("batch-summaries", "0.5"): 0}


def test_figures_without_traffic_are_absent_not_zero(mw: MetricsWorld) -> None:
    found = samples(families(mw.token).values())
    durations = {dict(labels).get("stage") or dict(labels)["pipeline"]
                 for (name, labels) in found if name.endswith("_duration_seconds")}  # fmt: skip
    assert "rerank" not in durations
    assert "batch-summaries" not in durations
    assert value(found, "latency_budget_pipeline_traces_total", pipeline="batch-summaries") == 0
    assert value(
        found, "latency_budget_stage_samples_total", pipeline="rag-chat", stage="rerank"
    ) == 0  # fmt: skip
    # No objective, no objective series.
    objectives = {
        dict(labels)["pipeline"]
        for name, labels in found
        if name == "latency_budget_pipeline_objective_target_ratio"
    }
    assert objectives == {"rag-chat"}


def test_names_with_quotes_backslashes_and_line_breaks_are_escaped(mw: MetricsWorld) -> None:
    text = text_of(scrape(mw.token))
    assert 'name="RAG \\"chat\\" \\\\ answer\\nv2"' in text
    (info,) = [
        s
        for s in families(mw.token)["latency_budget_pipeline_info"].samples
        if s.labels["pipeline"] == "rag-chat"
    ]
    assert info.labels["name"] == 'RAG "chat" \\ answer\nv2'


def test_prometheus_gets_openmetrics_gzipped_and_its_parser_agrees(mw: MetricsWorld) -> None:
    response = scrape(mw.token, Accept=PROMETHEUS_ACCEPT, **{"Accept-Encoding": "gzip"})
    assert response["Content-Type"] == "application/openmetrics-text; version=1.0.0; charset=utf-8"
    assert response["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in response["Vary"]
    text = text_of(response)
    assert text.endswith("# EOF\n")
    openmetrics = list(openmetrics_families(text))
    classic = list(text_string_to_metric_families(text_of(scrape(mw.token))))
    # The same samples in both formats (OpenMetrics types info as info), computed apart.
    computed = "latency_budget_scrape_computed_timestamp_seconds"
    assert {k: v for k, v in samples(openmetrics).items() if k[0] != computed} == {
        k: v for k, v in samples(classic).items() if k[0] != computed
    }
    assert {f.name: f.type for f in openmetrics}["latency_budget_pipeline"] == "info"
    assert {f.name: f.unit for f in openmetrics}["latency_budget_stage_budget_seconds"] == "seconds"


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Bearer",
        "Basic b2xpdmlhOnB3",
        "Bearer two words",
        "Bearer lbm_" + "x" * 300,
        "Bearer lbm_\u00e9t\u00e9",
        "Bearer lbm_unknown",
        "bearer",
    ],
)
def test_a_scrape_without_a_valid_token_gets_401_and_no_figures(
    mw: MetricsWorld, header: str | None
) -> None:
    response = Client(headers={"Authorization": header} if header is not None else {}).get(URL)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert b"latency_budget" not in response.content
    assert b"rag-chat" not in response.content


def test_other_tokens_are_refused_by_name(mw: MetricsWorld) -> None:
    _, personal = api_token_create(user=mw.world.owner, name="me")
    _, ingest = ingest_token_create(team=mw.team, name="sdk", created_by=mw.world.owner)
    assert "personal API token" in scrape(personal).content.decode()
    assert "ingest token" in scrape(ingest).content.decode()
    assert scrape(personal).status_code == scrape(ingest).status_code == 401


def test_a_revoked_token_gets_401(mw: MetricsWorld) -> None:
    token, raw = metrics_token_create(team=mw.team, name="old", created_by=mw.world.owner)
    assert scrape(raw).status_code == 200
    metrics_token_revoke(token=token)
    assert scrape(raw).status_code == 401


def test_the_rest_api_refuses_a_metrics_token(mw: MetricsWorld) -> None:
    response = scrape(mw.token)  # the token works here…
    assert response.status_code == 200
    api = Client(headers={"Authorization": f"Bearer {mw.token}"}).get("/api/v1/pipelines/")
    assert api.status_code == 401  # …and nowhere else
    assert "Metrics tokens can only scrape /metrics" in api.content.decode()


def test_each_team_sees_only_its_own_series(mw: MetricsWorld) -> None:
    theirs = samples(families(mw.other_token).values())
    assert {dict(labels)["team"] for _, labels in theirs} == {"globex"}
    pipelines = {dict(labels).get("pipeline") for _, labels in theirs} - {None}
    assert pipelines == {"rag-chat"}  # their own pipeline of the same slug, not acme's two
    assert value(theirs, "latency_budget_pipeline_traces_total", team="globex",
                 pipeline="rag-chat") == len(mw.other_traces)  # fmt: skip
    ours = samples(families(mw.token).values())
    assert {dict(labels)["team"] for _, labels in ours} == {"acme"}
    assert value(ours, "latency_budget_pipeline_traces_total", pipeline="rag-chat") == len(
        mw.traces
    )


def test_only_get_and_head_are_allowed(mw: MetricsWorld) -> None:
    client = Client(headers={"Authorization": f"Bearer {mw.token}"})
    assert client.post(URL).status_code == 405
    assert client.head(URL).status_code == 200


def test_scrapes_within_the_cache_period_share_one_computation(
    mw: MetricsWorld, settings: Any, django_assert_max_num_queries: Any
) -> None:
    settings.METRICS_CACHE_SECONDS = 15
    first = text_of(scrape(mw.token))
    make_pipeline(mw.team, "new-one", budget={"p95": 100})
    with django_assert_max_num_queries(1):  # the token's lookup; no figure is read
        again = text_of(scrape(mw.token))
    assert again == first
    assert "new-one" not in again
    settings.METRICS_CACHE_SECONDS = 0
    assert 'pipeline="new-one"' in text_of(scrape(mw.token))


def test_a_token_past_its_allowance_gets_429_with_retry_after(
    mw: MetricsWorld, settings: Any
) -> None:
    settings.METRICS_SCRAPES_PER_MINUTE_PER_TOKEN = 5
    statuses = [scrape(mw.token).status_code for _ in range(8)]
    assert statuses == [200] * 5 + [429] * 3
    refused = scrape(mw.token)
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert "METRICS_SCRAPES_PER_MINUTE_PER_TOKEN" in refused.content.decode()
    # Another team's token, another account: served meanwhile.
    assert scrape(mw.other_token).status_code == 200


def test_an_account_s_metrics_tokens_share_its_allowance(mw: MetricsWorld, settings: Any) -> None:
    settings.METRICS_SCRAPES_PER_MINUTE_PER_TOKEN = 10
    settings.METRICS_SCRAPES_PER_MINUTE_PER_ACCOUNT = 12
    extra = [
        metrics_token_create(team=mw.team, name=f"t{n}", created_by=mw.world.owner)[1]
        for n in range(3)
    ]
    served = sum(scrape(token).status_code == 200 for token in extra for _ in range(8))
    assert served == 12
    assert "METRICS_SCRAPES_PER_MINUTE_PER_ACCOUNT" in scrape(mw.token).content.decode()


def test_stages_past_the_cap_are_left_out_and_counted(mw: MetricsWorld, settings: Any) -> None:
    settings.METRICS_CACHE_SECONDS = 0
    settings.METRICS_MAX_STAGES = 2
    settings.METRICS_MAX_PIPELINES = 1
    make_stage(mw.pipeline, "judge", budget_ms=90)
    found = samples(families(mw.token).values())
    # batch-summaries sorts first: the one pipeline read, with no stage of its own.
    assert {dict(labels).get("pipeline") for _, labels in found} - {None} == {"batch-summaries"}
    assert value(found, "latency_budget_scrape_omitted", kind="pipelines") == 1
    assert value(found, "latency_budget_scrape_omitted", kind="stages") == 0
    settings.METRICS_MAX_PIPELINES = 5
    found = samples(families(mw.token).values())
    stages = {dict(labels).get("stage") for _, labels in found} - {None}
    assert stages == {"retrieval", "generation"}
    assert value(found, "latency_budget_scrape_omitted", kind="stages") == 2


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (PROMETHEUS_ACCEPT, "openmetrics"),
        ("application/openmetrics-text; version=1.0.0", "openmetrics"),
        ("", "text"),
        ("*/*", "text"),
        ("text/html,application/xhtml+xml,*/*;q=0.8", "text"),
        ("application/openmetrics-text;q=0.2,text/plain;q=0.9", "text"),
        ("application/openmetrics-text;q=banana", "text"),
        (";;;,,,==;q=", "text"),
        ("text/plain;q=0.1," * 40 + "application/openmetrics-text", "text"),
    ],
)
def test_the_format_follows_the_accept_header(mw: MetricsWorld, accept: str, expected: str) -> None:
    response = scrape(mw.token, Accept=accept)
    assert response.status_code == 200
    openmetrics = response["Content-Type"].startswith("application/openmetrics-text")
    assert openmetrics == (expected == "openmetrics")
    assert text_of(response).endswith("# EOF\n") == openmetrics
