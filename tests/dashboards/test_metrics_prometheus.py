"""/metrics scraped by a real Prometheus server (Debian's ``prometheus``) from the app
served by gunicorn: the values it stores equal the exact computation, each team's
token sees its own series only, refusals show on Prometheus' targets, and every
expression of the Grafana dashboard in docs/ runs against what it scraped."""

import json
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.parse import urlencode
from urllib.request import Request, urlopen

import pytest
import yaml
from django.conf import settings

from apps.core.counters import window_consume
from apps.teams.services import api_token_create, metrics_token_create
from tests.builders.bucket_rows import nearest_rank
from tests.conftest import TeamWorld
from tests.dashboards.metrics_world import MetricsWorld, build_metrics_world, sketch_seconds
from tests.processes import free_port, running, wait_for, web_server
from tests.timing import MS

PROMETHEUS = shutil.which("prometheus")
DOCS = Path(__file__).resolve().parents[2] / "docs"
DASHBOARD = DOCS / "grafana" / "latency-budgets.json"
# Past the allowance used up below, but far above what the 1 s scrapes of the test use.
SCRAPES_PER_MINUTE = 600

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.usefixtures("clean_cache"),
    pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not installed (Debian package)"),
]


@dataclass(frozen=True)
class Prometheus:
    url: str

    def api(self, path: str, **params: str) -> Any:
        with urlopen(f"{self.url}/api/v1/{path}?{urlencode(params)}", timeout=10) as response:  # noqa: S310
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def value(self, expr: str) -> float:
        (sample,) = self.query(expr)
        return float(sample["value"][1])

    def targets(self) -> dict[str, dict[str, Any]]:
        return {t["labels"]["job"]: t for t in self.api("targets")["activeTargets"]}


@contextmanager
def prometheus(tmp_path: Path, jobs: list[dict[str, Any]]) -> Iterator[Prometheus]:
    """Our own Prometheus process (not the package's service), scraping every second."""
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                "scrape_configs": jobs,
            }
        )
    )
    command = [
        str(PROMETHEUS),
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    log = tmp_path / "prometheus.log"
    with running(command, log_path=log, env={"PATH": "/usr/bin:/bin"}) as proc:
        server = Prometheus(f"http://127.0.0.1:{port}")

        def ready() -> bool:
            try:
                with urlopen(f"{server.url}/-/ready", timeout=2) as response:  # noqa: S310
                    return bool(response.status == 200)
            except OSError:
                return proc.poll() is not None

        if not wait_for(ready, timeout=60) or proc.poll() is not None:
            raise RuntimeError(f"prometheus did not start:\n{log.read_text()[-4000:]}")
        yield server


def spend_allowance(url: str, token: str) -> None:
    """Scrape with ``token`` until the server says 429, early enough in a minute that the
    test ends before the next one gives the token a fresh allowance."""
    if time.time() % 60 > 15:
        time.sleep(60 - time.time() % 60 + 0.5)
    request = Request(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"})  # noqa: S310
    for _ in range(SCRAPES_PER_MINUTE + 1):
        try:
            urlopen(request, timeout=10).read()  # noqa: S310
        except HTTPError as exc:
            status = exc.code
            break
    else:
        status = 200
    assert status == 429, "the token was never throttled"


def job(name: str, target: str, **auth: Any) -> dict[str, Any]:
    return {"job_name": name, "static_configs": [{"targets": [target]}], **auth}


def scraped(server: Prometheus, jobs: list[str]) -> bool:
    targets = server.targets()
    return all(targets.get(j, {}).get("lastScrape", "").startswith("2") and
               targets[j]["health"] != "unknown" for j in jobs)  # fmt: skip


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    return [t["expr"] for p in panels for t in p["targets"]]


def documented_expressions() -> list[str]:
    """The PromQL examples of docs/metrics.md: each run of lines between comments and
    blank lines in its ``promql`` blocks."""
    blocks = re.findall(r"```promql\n(.*?)```", (DOCS / "metrics.md").read_text(), re.DOTALL)
    expressions: list[str] = []
    for block in blocks:
        current: list[str] = []
        for line in [*block.splitlines(), ""]:
            if line.strip() and not line.lstrip().startswith("#"):
                current.append(line)
            elif current:
                expressions.append("\n".join(current))
                current = []
    return expressions


def substituted(expr: str, mw: MetricsWorld) -> str:
    values = {"team": mw.team.slug, "pipeline": mw.pipeline.slug, "window": "5m",
              "quantile": "0.95", "__rate_interval": "1m"}  # fmt: skip
    return re.sub(r"\$\{?(\w+)\}?", lambda m: values[m.group(1)], expr)


@pytest.fixture
def mw(world: TeamWorld) -> MetricsWorld:
    return build_metrics_world(world)


def test_prometheus_stores_the_budgets_and_percentiles_of_exact_computation(
    mw: MetricsWorld, tmp_path: Path
) -> None:
    token_file = tmp_path / "acme.token"
    token_file.write_text(mw.token + "\n")
    _, revoked = metrics_token_create(team=mw.team, name="old", created_by=mw.world.owner)
    mw.team.metrics_tokens.filter(name="old").update(revoked_at="2025-01-01T00:00:00Z")
    _, personal = api_token_create(user=mw.world.owner, name="me")
    _, spent = metrics_token_create(team=mw.team, name="spent", created_by=mw.world.owner)
    env = {
        "METRICS_SCRAPES_PER_MINUTE_PER_TOKEN": str(SCRAPES_PER_MINUTE),
        "METRICS_SCRAPES_PER_MINUTE_PER_ACCOUNT": str(10 * SCRAPES_PER_MINUTE),
    }
    if settings.REDIS_URL:
        # The "spent" token has used this minute's allowance and the next four, in the
        # counters the web server shares: a slow start must not reach a fresh minute.
        spent_digest = mw.team.metrics_tokens.get(name="spent").digest
        for minute in range(0, 300, 60):
            window_consume(
                f"metrics:token:{spent_digest[:24]}",
                limit=SCRAPES_PER_MINUTE,
                window_s=60,
                amount=SCRAPES_PER_MINUTE + 1,
                now=time.time() + minute,
            )

    with web_server(tmp_path / "web.log", env=env) as web:
        if not settings.REDIS_URL:
            # Without Redis the counters live in the web server's process: spent there.
            spend_allowance(web.url, spent)
        target = web.url.removeprefix("http://")
        jobs = [
            # The two ways a scrape config carries a bearer token.
            job("authorization", target,
                authorization={"type": "Bearer", "credentials_file": str(token_file)}),
            job("bearer_token", target, bearer_token=mw.token),
            job("globex", target, authorization={"credentials": mw.other_token}),
            job("anonymous", target),
            job("revoked", target, authorization={"credentials": revoked}),
            job("personal", target, authorization={"credentials": personal}),
            job("throttled", target, authorization={"credentials": spent}),
        ]  # fmt: skip
        with prometheus(tmp_path, jobs) as server:
            names = [j["job_name"] for j in jobs]
            assert wait_for(lambda: scraped(server, names), timeout=60), server.targets()
            # Counters need two samples for rate() in the dashboard's expressions.
            time.sleep(2.5)
            targets = server.targets()
            check_values(server, mw)
            check_teams_apart(server, mw)
            check_dashboard(server, mw)
            check_documented_expressions(server, mw)

    for name in ("authorization", "bearer_token", "globex"):
        assert targets[name]["health"] == "up", targets[name]
    for name in ("anonymous", "revoked", "personal"):
        assert targets[name]["health"] == "down"
        assert "401 Unauthorized" in targets[name]["lastError"], targets[name]
    assert targets["throttled"]["health"] == "down"
    assert "429 Too Many Requests" in targets["throttled"]["lastError"]


def check_values(server: Prometheus, mw: MetricsWorld) -> None:
    acme = 'team="acme",pipeline="rag-chat"'
    for job_name in ("authorization", "bearer_token"):
        scope = f'job="{job_name}",{acme}'
        assert (
            server.value(f'latency_budget_stage_budget_seconds{{{scope},stage="retrieval"}}') == 0.4
        )
        assert (
            server.value(f'latency_budget_pipeline_budget_seconds{{{scope},quantile="0.95"}}')
            == 2.5
        )

    scope = f'job="authorization",{acme}'
    recent, hour = mw.recent(300), mw.recent(3600)
    walls = [t.stages[mw.retrieval.pk][0] for t in recent]
    p95 = server.value(
        f'latency_budget_stage_duration_seconds{{{scope},stage="retrieval",quantile="0.95",'
        'window="5m"}'
    )
    assert p95 == sketch_seconds(walls, 0.95)
    exact = nearest_rank([w / MS / 1000 for w in walls], 0.95)
    assert abs(p95 - exact) <= 0.01 * exact + 0.00005
    e2e_p95 = server.value(
        f'latency_budget_pipeline_duration_seconds{{{scope},quantile="0.95",window="1h"}}'
    )
    assert e2e_p95 == sketch_seconds([t.e2e_ns for t in hour], 0.95)
    assert server.value(f"latency_budget_pipeline_traces_total{{{scope}}}") == len(mw.traces)
    assert server.value(f'latency_budget_stage_violations_open{{{scope},stage="retrieval"}}') == 1
    # The label value that needed escaping arrives whole.
    (info,) = server.query(f"latency_budget_pipeline_info{{{scope}}}")
    assert info["metric"]["name"] == mw.pipeline.name


def check_teams_apart(server: Prometheus, mw: MetricsWorld) -> None:
    series = server.api("series", **{"match[]": '{__name__=~"latency_budget_.+"}'})
    teams_by_job: dict[str, set[str]] = {}
    for labels in series:
        teams_by_job.setdefault(labels["job"], set()).add(labels["team"])
    assert teams_by_job == {"authorization": {"acme"}, "bearer_token": {"acme"},
                            "globex": {"globex"}}  # fmt: skip
    globex = server.query('latency_budget_pipeline_info{job="globex"}')
    assert [s["metric"]["name"] for s in globex] == ["Globex chat"]
    # Same slug, the other team's traffic: three times slower than acme's.
    other_p95 = server.value(
        'latency_budget_pipeline_duration_seconds{job="globex",quantile="0.95",window="1h"}'
    )
    hour = [t for t in mw.other_traces if t.start >= mw.now - 3600]
    assert other_p95 == sketch_seconds([t.e2e_ns for t in hour], 0.95)


def check_dashboard(server: Prometheus, mw: MetricsWorld) -> None:
    """Every expression of the dashboard is valid PromQL over what was scraped, and each
    metric it names is one the scrape has."""
    scraped_names = set(server.api("label/__name__/values"))
    expressions = dashboard_expressions()
    assert len(expressions) >= 10
    for expr in expressions:
        for name in re.findall(r"\blatency_budget_\w+", expr):
            assert name in scraped_names, (name, expr)
        result = server.query(substituted(expr, mw))
        assert result, expr  # every panel has something to show for this pipeline


def check_documented_expressions(server: Prometheus, mw: MetricsWorld) -> None:
    """The examples of docs/metrics.md are valid PromQL over a real scrape, even with two
    jobs scraping one team."""
    expressions = documented_expressions()
    assert len(expressions) >= 6
    for expr in expressions:
        server.query(expr)  # a PromQL error fails the request's status
    recent = mw.recent(300)
    retrieval = sketch_seconds([t.stages[mw.retrieval.pk][0] for t in recent], 0.95)
    generation = sketch_seconds([t.stages[mw.generation.pk][0] for t in recent], 0.99)
    expected = {"retrieval"} if retrieval > 0.4 else set()
    expected |= {"generation"} if generation > 1.5 else set()
    assert expected  # the data has a stage over its budget
    over = server.query(expressions[0])
    assert {s["metric"]["stage"] for s in over} == expected
    reached = server.query(expressions[-2])
    assert reached, expressions[-2]
