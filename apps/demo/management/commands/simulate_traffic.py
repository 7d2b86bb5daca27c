import random
import signal
import threading
import time
import urllib.error
import urllib.request
from argparse import ArgumentParser
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from apps.demo.traffic import (
    CountingExporter,
    Drift,
    Switches,
    TracePlanner,
    drain,
    run_paced,
    shape_for_pipeline,
)
from apps.demo.traffic.demo_token import demo_ingest_token_path
from apps.demo.traffic.traffic_plan import MEDIAN_MS
from apps.pipelines.models import Pipeline
from apps.pipelines.selectors import pipelines_for_team
from apps.teams.models import Team
from apps.teams.selectors import ingest_token_active_for_team, team_by_slug

TRACES_PATH = "/v1/traces"
MAX_RPS = 5000
FLUSH_TIMEOUT_S = 10.0
# Honcho kills what has not stopped 5 s after Ctrl-C: leave time to print the summary.
FLUSH_AFTER_SIGNAL_TIMEOUT_S = 3.0


class Command(BaseCommand):
    help = (
        "Send realistic traces of a pipeline to a running server through the OpenTelemetry "
        "SDK's OTLP/HTTP exporter, at a steady rate, until --duration or Ctrl-C."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--team", required=True, help="Slug of the team that owns the pipeline."
        )
        parser.add_argument("--pipeline", required=True, help="Slug of the pipeline to imitate.")
        parser.add_argument("--rps", type=float, default=20.0, help="Traces per second.")
        parser.add_argument(
            "--duration", type=float, help="Seconds to run (default: until Ctrl-C)."
        )
        parser.add_argument("--url", help="Base URL of the server (default: SITE_URL).")
        parser.add_argument(
            "--token",
            help="Team ingest token (default for the demo team: the one demo_setup saved).",
        )
        parser.add_argument("--seed", type=int, help="Repeat the same durations and errors.")
        parser.add_argument("--gzip", action="store_true", help="Compress requests with gzip.")
        switches = parser.add_argument_group(
            "pipeline changes", "Send traffic as if the pipeline had been changed (docs/whatif.md)."
        )
        switches.add_argument(
            "--concurrent-history-rewrite",
            action="store_true",
            help="Load the conversation history while rewriting the query, not before.",
        )
        switches.add_argument("--skip-rerank", action="store_true", help="Leave out rerank.")
        switches.add_argument(
            "--retrieval-cache",
            type=float,
            default=0.0,
            metavar="HIT_RATIO",
            help="Answer this share (0 to 1) of retrievals from a cache, in about 15 ms.",
        )
        switches.add_argument(
            "--generation-speedup",
            type=float,
            default=0.0,
            metavar="FRACTION",
            help="Generation takes this much less time: 0.2 is 20 %% faster.",
        )
        drifting = parser.add_argument_group(
            "a drifting step",
            "Slow one step down now and then, so that its stage goes over budget and back: "
            "violations open and close (the demo drifts rerank).",
        )
        drifting.add_argument(
            "--drift", choices=list(MEDIAN_MS), metavar="STEP", help="The step that drifts."
        )
        drifting.add_argument(
            "--drift-factor",
            type=float,
            default=2.5,
            help="How many times slower it gets (default: 2.5).",
        )
        drifting.add_argument(
            "--drift-every",
            type=float,
            default=900.0,
            metavar="SECONDS",
            help="How often it drifts (default: every 900 s).",
        )
        drifting.add_argument(
            "--drift-for",
            type=float,
            default=180.0,
            metavar="SECONDS",
            help="How long each drift lasts (default: 180 s).",
        )
        drifting.add_argument(
            "--drift-first",
            type=float,
            default=300.0,
            metavar="SECONDS",
            help="When the first drift starts, counted from the start (default: 300 s).",
        )
        parser.add_argument(
            "--wait",
            type=float,
            default=60.0,
            help="Seconds to wait for the server's /healthz to answer (default: 60).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        rps, duration = options["rps"], options["duration"]
        if not 0 < rps <= MAX_RPS:
            raise CommandError(f"--rps must be more than 0 and at most {MAX_RPS}, not {rps:g}.")
        if duration is not None and duration <= 0:
            raise CommandError(
                f"--duration must be a positive number of seconds, not {duration:g}."
            )
        try:
            switches = Switches(
                concurrent_history_rewrite=options["concurrent_history_rewrite"],
                skip_rerank=options["skip_rerank"],
                retrieval_cache_hit_ratio=options["retrieval_cache"],
                generation_speedup=options["generation_speedup"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        drift = None
        if options["drift"]:
            try:
                drift = Drift(
                    step=options["drift"],
                    factor=options["drift_factor"],
                    every_s=options["drift_every"],
                    length_s=options["drift_for"],
                    first_s=options["drift_first"],
                )
            except ValueError as exc:
                raise CommandError(str(exc)) from None
        team = team_by_slug(slug=options["team"])
        if team is None:
            raise CommandError(f"No team with the slug “{options['team']}”.")
        pipeline = pipelines_for_team(team=team).filter(slug=options["pipeline"]).first()
        if pipeline is None:
            raise CommandError(
                f"Team {team.slug} has no pipeline with the slug “{options['pipeline']}”."
            )
        token = _token(team=team, given=options["token"])
        base_url = _base_url(options["url"] or settings.SITE_URL)

        # Ctrl-C or SIGTERM at any point, even while waiting for the server, ends the
        # command cleanly: what is sent is flushed, and it exits 0.
        stop = threading.Event()
        with _stop_on_signals(stop):
            self.stdout.write(f"Waiting for {base_url}/healthz …")
            if not _wait_for_server(base_url, timeout=options["wait"], stop=stop):
                self.stdout.write("Stopped before the server answered; nothing was sent.")
                return
            self._run(
                pipeline=pipeline,
                endpoint=base_url + TRACES_PATH,
                token=token,
                rps=rps,
                duration=duration,
                seed=options["seed"],
                gzip=options["gzip"],
                switches=switches,
                drift=drift,
                stop=stop,
            )

    def _run(
        self,
        *,
        pipeline: Pipeline,
        endpoint: str,
        token: str,
        rps: float,
        duration: float | None,
        seed: int | None,
        gzip: bool,
        switches: Switches,
        drift: Drift | None = None,
        stop: threading.Event,
    ) -> None:
        shape = shape_for_pipeline(pipeline=pipeline)
        exporter = CountingExporter(
            OTLPSpanExporter(
                endpoint=endpoint,
                headers={"Authorization": f"Bearer {token}"},
                compression=Compression.Gzip if gzip else Compression.NoCompression,
            )
        )
        provider = TracerProvider(
            resource=Resource.create(
                {"service.name": shape.service, "deployment.environment.name": "simulated"}
            ),
            shutdown_on_exit=False,  # drained below, with a time limit
        )
        # Room for ten seconds of spans, so a slow export does not drop any.
        queue_size = max(2048, int(rps * 15 * 10))
        provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=queue_size))
        # Seeds the shapes only: random ids keep two runs from colliding on the server.
        planner = TracePlanner(rng=random.Random(seed), shape=shape, switches=switches, drift=drift)
        self.stdout.write(
            f"Sending {rps:g} traces/s of “{pipeline.name}” as {shape.service} “{shape.root_span}” "
            f"to {endpoint} ({f'for {duration:g} s' if duration else 'Ctrl-C stops'})"
        )
        if drift is not None:
            self.stdout.write(
                f"{drift.step} drifts {drift.factor:g}x slower for {drift.length_s:g} s every "
                f"{drift.every_s:g} s, the first time {drift.first_s:g} s from now"
            )
        try:
            stats = run_paced(
                planner=planner, provider=provider, rps=rps, duration=duration, stop=stop
            )
        finally:
            timeout = FLUSH_AFTER_SIGNAL_TIMEOUT_S if stop.is_set() else FLUSH_TIMEOUT_S
            drain(provider=provider, exporter=exporter, timeout=timeout)
        self.stdout.write(
            f"Sent {stats.traces} traces ({stats.spans} spans, {stats.errors} with errors) "
            f"in {stats.elapsed:.1f} s; {exporter.exported_spans} spans exported; "
            f"export failures: {exporter.failed_batches} "
            f"({exporter.failed_spans} spans)"
        )


def _token(*, team: Team, given: str | None) -> str:
    if given is None:
        if team.slug != "demo":
            raise CommandError(
                f"--token is required for team {team.slug}: "
                f"create one with `manage.py ingest_token create --team {team.slug}`."
            )
        path = demo_ingest_token_path()
        if not path.exists():
            raise CommandError(
                f"No --token given and {path} does not exist: run `manage.py demo_setup`."
            )
        given = path.read_text().strip()
    token = given.strip()
    if ingest_token_active_for_team(team=team, raw=token) is None:
        raise CommandError(f"The token is not an active ingest token of team {team.slug}.")
    return token


def _base_url(url: str) -> str:
    url = url.strip().rstrip("/")
    url = url.removesuffix(TRACES_PATH)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CommandError(f"--url must be an http:// or https:// URL, not “{url}”.")
    return url


def _wait_for_server(base_url: str, *, timeout: float, stop: threading.Event) -> bool:
    """True once GET /healthz answers 200 (`make run` starts us alongside the web server);
    False if asked to stop first."""
    deadline = time.monotonic() + timeout
    while not stop.is_set():
        try:
            # The scheme was checked by _base_url.
            with urllib.request.urlopen(f"{base_url}/healthz", timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() >= deadline:
            raise CommandError(f"No server answered at {base_url}/healthz within {timeout:g} s.")
        stop.wait(0.5)
    return False


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Ctrl-C and honcho's SIGTERM end the run cleanly, so the last spans still get sent."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
