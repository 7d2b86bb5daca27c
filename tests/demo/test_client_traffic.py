"""Demo traffic served through the latency-budgets client against a live server: budgets
read with a metrics token, spans through the SDK's OTLP exporter with an ingest token,
stages taken from ``latency_budget.stage`` with no span rule, and the client's own count
of its decisions, with the levers and without."""

import io
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.analysis.models import StageSample
from apps.demo.traffic import Profile, drain, otlp_provider
from apps.demo.traffic.client_run import ClientRunReport, traffic_run_through_client
from apps.demo.traffic.slow_phases import SlowPhases
from apps.ingest.models import RawBatch, Trace
from apps.pipelines.models import Pipeline
from apps.teams.models import MetricsToken, Team
from apps.teams.services import ingest_token_create, metrics_token_create, metrics_token_revoke
from tests.builders.configuration import make_pipeline, make_team
from tests.demo.scaled_demo import SPEED, scaled_demo_pipeline, scaled_stage_budgets
from tests.processes import ROOT, process_env, wait_for
from tests.sdk_sender import workers_settle

RPS = 20
RUN_S = 2.0
QUIET = Profile(error_rate=0, outlier_rate=0, tool_rate=0)
# Slow from the first request to the last: every primary first token is late.
LATE_FIRST_TOKENS = SlowPhases(every_s=60, length_s=60, first_s=0, steps=("ttft",))


class Demo:
    def __init__(self, url: str) -> None:
        self.url = url
        self.team = make_team("acme")
        self.pipeline = scaled_demo_pipeline(self.team)
        _sender, self.ingest = ingest_token_create(team=self.team, name="app", created_by=None)
        _reader, self.metrics = metrics_token_create(team=self.team, name="app", created_by=None)

    def run(self, *, levers: bool = True, slow: SlowPhases | None = None) -> ClientRunReport:
        provider, exporter = otlp_provider(
            endpoint=f"{self.url}/v1/traces", token=self.ingest, service="chat-api", rps=RPS
        )
        try:
            return traffic_run_through_client(
                url=self.url,
                metrics_token=self.metrics,
                pipeline=self.pipeline,
                provider=provider,
                rps=RPS,
                duration=RUN_S,
                stop=threading.Event(),
                levers=levers,
                speed=SPEED,
                slow=slow,
                profile=QUIET,
                seed=1,
            )
        finally:
            drain(provider=provider, exporter=exporter, timeout=10)
            assert exporter.failed_spans == 0


@pytest.fixture
def demo(live_server: Any, transactional_db: None, clean_cache: None, settings: Any) -> Demo:
    settings.RUNTIME_DOCUMENT_CACHE_SECONDS = 0
    return Demo(live_server.url)


@pytest.mark.slow
def test_the_clients_traces_arrive_with_every_stage_matched_without_a_rule(demo: Demo) -> None:
    report = demo.run()
    assert report.requests >= RPS * RUN_S * 0.8
    assert report.broken == report.cut_short == 0
    assert report.with_deadline == report.requests  # the budgets were read first
    assert report.deadline_ms == demo.pipeline.objective_threshold_ms
    workers_settle()
    traces = Trace.objects.filter(pipeline=demo.pipeline)
    assert traces.count() == report.requests
    stage_ids = dict(demo.pipeline.stages.values_list("id", "slug"))
    samples: dict[str, int] = {}
    for sample in StageSample.objects.filter(pipeline_id=demo.pipeline.pk):
        samples[stage_ids[sample.stage_id]] = samples.get(stage_ids[sample.stage_id], 0) + 1
    assert samples == dict.fromkeys(scaled_stage_budgets(), report.requests)


@pytest.mark.slow
def test_late_first_tokens_fall_back_with_levers_and_are_waited_for_without(demo: Demo) -> None:
    with_levers = demo.run(slow=LATE_FIRST_TOKENS)
    without = demo.run(slow=LATE_FIRST_TOKENS, levers=False)

    assert with_levers.requests >= RPS * RUN_S * 0.8
    # Every request falls back but those of the holdout, run with every lever off.
    fallbacks = with_levers.decision_count(action="fallback", stage="ttft")
    assert fallbacks == with_levers.requests - with_levers.holdout
    assert without.requests >= RPS * RUN_S * 0.8
    assert without.decisions == {}
    # The fallback keeps requests within the deadline that waiting for the slow model misses.
    assert with_levers.within_share is not None
    assert without.within_share is not None
    assert with_levers.within_share >= 0.9
    assert without.within_share <= with_levers.within_share - 0.2


@pytest.mark.slow
def test_the_command_serves_through_the_client_and_prints_what_it_decided(demo: Demo) -> None:
    out = io.StringIO()
    call_command(
        "simulate_traffic", team="acme", pipeline="rag-chat", mode="client", rps=RPS,
        duration=1.5, speed=SPEED, url=demo.url, token=demo.ingest, metrics_token=demo.metrics,
        slow_every=60, slow_for=60, slow_first=0, slow_step=["ttft"], stdout=out,
    )  # fmt: skip
    output = out.getvalue()
    assert "through the latency-budgets client (levers on, speed 0.1)" in output
    assert "ttft 6x slower for 60 s every 60 s, the first time 0 s from now" in output
    assert "Served " in output
    assert f"Within the deadline ({demo.pipeline.objective_threshold_ms} ms): " in output
    # Other levers may act too (a rerank slower than its cap by chance): in name order.
    assert re.search(r"^Client decisions: (.+, )?ttft fallback \d+", output, re.MULTILINE)
    assert "export failures: 0 (0 spans)" in output
    assert demo.metrics not in output
    assert demo.ingest not in output


@pytest.mark.slow
def test_a_signal_ends_the_client_mode_with_its_summary_and_every_span_sent(
    demo: Demo, tmp_path: Path
) -> None:
    """As honcho's SIGTERM at the end of `make run`: requests under way finish, the
    summary is printed, what was queued reaches the server, and the command exits 0."""
    log_path = tmp_path / "simulator.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable, "manage.py", "simulate_traffic", "--team", "acme",
                "--pipeline", "rag-chat", "--mode", "client", "--rps", str(RPS),
                "--speed", str(SPEED), "--url", demo.url, "--token", demo.ingest,
                "--metrics-token", demo.metrics,
            ],
            cwd=ROOT, env=process_env(), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        started = "through the latency-budgets client"
        assert wait_for(lambda: started in log_path.read_text(), timeout=60)
        time.sleep(1.5)
        proc.send_signal(signal.SIGTERM)
        returncode = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = log_path.read_text()
    assert returncode == 0, output
    assert "Traceback" not in output
    served = re.search(r"Served (\d+) requests through the client", output)
    assert served, output
    assert int(served[1]) > 0
    assert "Within the deadline" in output
    assert "Client decisions: " in output
    sent = re.search(r"(\d+) spans exported; export failures: 0 \(0 spans\)", output)
    assert sent, output
    stored = sum(batch.span_count for batch in RawBatch.objects.filter(team=demo.team))
    assert stored == int(sent[1]) > 0


@pytest.fixture
def acme(db: None) -> tuple[Team, Pipeline, str, str]:
    team = make_team("acme")
    pipeline = make_pipeline(team, "support")
    _sender, ingest = ingest_token_create(team=team, name="sim", created_by=None)
    _reader, metrics = metrics_token_create(team=team, name="sim", created_by=None)
    return team, pipeline, ingest, metrics


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"levers": False}, "--levers: only with --mode client"),
        ({"speed": 0.2, "slow_every": 60}, "--speed, --slow-every: only with --mode client"),
        ({"mode": "client", "skip_rerank": True}, "pipeline changes .* are for --mode replay"),
        ({"mode": "client", "speed": 0}, "--speed is between 0.01 and 10"),
        ({"mode": "client", "slow_for": 30}, "--slow-for need --slow-every"),
        ({"mode": "client", "slow_every": 60, "slow_for": 90}, "lasts .* at most its period"),
        ({"mode": "client", "rps": 200}, "keep about .* requests in flight"),
        ({"mode": "client", "metrics_token": None}, "--metrics-token is required for team acme"),
        ({"mode": "client", "metrics_token": "lbm_nope"}, "not an active metrics token"),
        ({"mode": "client", "metrics_token": "ingest"}, "not an active metrics token"),
    ],
)
def test_the_client_mode_explains_bad_arguments(
    acme: tuple[Team, Pipeline, str, str], options: dict[str, Any], message: str
) -> None:
    _team, _pipeline, ingest, metrics = acme
    arguments: dict[str, Any] = {
        "team": "acme",
        "pipeline": "support",
        "token": ingest,
        "metrics_token": metrics if options.get("mode") == "client" else None,
        "url": "http://127.0.0.1:9",
        "wait": 0,
    }
    arguments.update(options)
    if arguments["metrics_token"] == "ingest":
        arguments["metrics_token"] = ingest
    arguments = {key: value for key, value in arguments.items() if value is not None}
    with pytest.raises(CommandError, match=message):
        call_command("simulate_traffic", stdout=io.StringIO(), **arguments)


def test_demo_setup_saves_a_private_metrics_token_the_client_mode_reads(
    db: None, settings: Any, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("demo_setup", stdout=out)
    path = tmp_path / "demo-metrics-token"
    raw = path.read_text().strip()
    assert raw.startswith("lbm_")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert f"metrics token (the demo client's budgets) saved to {path}" in out.getvalue()
    assert raw not in out.getvalue()
    call_command("demo_setup", stdout=io.StringIO())
    assert path.read_text().strip() == raw
    team = Team.objects.get(slug="demo")
    assert MetricsToken.objects.filter(team=team, revoked_at__isnull=True).count() == 1
    # Both saved tokens are taken: the run gets as far as looking for the server.
    with pytest.raises(CommandError, match="No server answered"):
        call_command(
            "simulate_traffic", team="demo", pipeline="rag-chat", mode="client",
            url="http://127.0.0.1:9", wait=0, stdout=io.StringIO(),
        )  # fmt: skip

    metrics_token_revoke(token=MetricsToken.objects.get(team=team))
    call_command("demo_setup", stdout=io.StringIO())
    assert path.read_text().strip() != raw
    assert MetricsToken.objects.filter(team=team, revoked_at__isnull=True).count() == 1
