import random
import signal
import threading
from argparse import ArgumentParser
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.demo.traffic import (
    Drift,
    Switches,
    TracePlanner,
    drain,
    otlp_provider,
    run_paced,
    shape_for_pipeline,
)
from apps.demo.traffic.client_mode import (
    add_client_arguments,
    client_mode_options,
    run_client_mode,
)
from apps.demo.traffic.demo_token import ingest_token_for_run, metrics_token_for_run
from apps.demo.traffic.destination import Destination, destination_for_run, wait_until_answers
from apps.demo.traffic.send import (
    FLUSH_AFTER_SIGNAL_TIMEOUT_S,
    FLUSH_TIMEOUT_S,
    GRPC,
    HTTP_PROTOBUF,
    PROTOCOLS,
    TRACES_PATH,
)
from apps.demo.traffic.traffic_plan import MEDIAN_MS
from apps.pipelines.models import Pipeline
from apps.pipelines.selectors import pipelines_for_team
from apps.teams.selectors import team_by_slug

REPLAY, CLIENT = "replay", "client"
MAX_RPS = 5000
# Each request of the client mode holds a thread for its whole duration.
DEFAULT_RPS = {REPLAY: 20.0, CLIENT: 5.0}


class Command(BaseCommand):
    help = (
        "Send realistic traces of a pipeline to a running server through the OpenTelemetry "
        "SDK's OTLP exporter (HTTP, or gRPC with --protocol grpc), at a steady rate, until "
        "--duration or Ctrl-C: planned traces replayed at once (--mode replay), or requests "
        "served in real time through the latency-budgets client (--mode client)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--team", required=True, help="Slug of the team that owns the pipeline."
        )
        parser.add_argument("--pipeline", required=True, help="Slug of the pipeline to imitate.")
        parser.add_argument(
            "--mode",
            choices=[REPLAY, CLIENT],
            default=REPLAY,
            help="replay (default): each planned trace sent at once, with its times; "
            "client: each request served in real time through the latency-budgets client.",
        )
        parser.add_argument(
            "--rps",
            type=float,
            help=f"Traces per second (default: {DEFAULT_RPS[REPLAY]:g}; "
            f"{DEFAULT_RPS[CLIENT]:g} with --mode client).",
        )
        parser.add_argument(
            "--duration", type=float, help="Seconds to run (default: until Ctrl-C)."
        )
        parser.add_argument(
            "--url",
            help="Base URL of the server (default: SITE_URL): OTLP/HTTP goes to its "
            f"{TRACES_PATH}, and the client mode reads the budgets there.",
        )
        parser.add_argument(
            "--protocol",
            choices=PROTOCOLS,
            default=HTTP_PROTOBUF,
            help="How the spans travel, spelled as in OTEL_EXPORTER_OTLP_PROTOCOL: "
            f"{HTTP_PROTOBUF} (default) to --url, or {GRPC} to --grpc-endpoint.",
        )
        parser.add_argument(
            "--grpc-endpoint",
            metavar="HOST:PORT",
            help=f"The server's OTLP/gRPC port, with --protocol {GRPC} (default: "
            "OTLP_GRPC_HOST:OTLP_GRPC_PORT); plaintext, or TLS as https://HOST:PORT.",
        )
        parser.add_argument(
            "--token",
            help="Team ingest token (default for the demo team: the one demo_setup saved).",
        )
        parser.add_argument("--seed", type=int, help="Repeat the same durations and errors.")
        parser.add_argument("--gzip", action="store_true", help="Compress requests with gzip.")
        switches = parser.add_argument_group(
            "pipeline changes",
            "Send traffic as if the pipeline had been changed (docs/whatif.md); replay mode.",
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
        add_client_arguments(parser)
        parser.add_argument(
            "--wait",
            type=float,
            default=60.0,
            help="Seconds to wait for the server's /healthz to answer (default: 60).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        rps, duration = options["rps"], options["duration"]
        if rps is None:
            rps = options["rps"] = DEFAULT_RPS[options["mode"]]
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
        client = client_mode_options(
            options, client=options["mode"] == CLIENT, switches=switches, pipeline=pipeline
        )
        token = ingest_token_for_run(team=team, given=options["token"])
        metrics_token = (
            None
            if client is None
            else metrics_token_for_run(team=team, given=options["metrics_token"])
        )
        destination = destination_for_run(
            url=options["url"] or settings.SITE_URL,
            protocol=options["protocol"],
            grpc_endpoint=options["grpc_endpoint"],
        )

        # Ctrl-C or SIGTERM at any point, even while waiting for the server, ends the
        # command cleanly: what is sent is flushed, and it exits 0.
        stop = threading.Event()
        with _stop_on_signals(stop):
            for what, answers in destination.waits(budgets=client is not None):
                self.stdout.write(f"Waiting for {what} …")
                if not wait_until_answers(answers, what=what, timeout=options["wait"], stop=stop):
                    self.stdout.write("Stopped before the server answered; nothing was sent.")
                    return
            if client is not None:
                assert metrics_token is not None
                run_client_mode(
                    out=self.stdout,
                    pipeline=pipeline,
                    destination=destination,
                    token=token,
                    metrics_token=metrics_token,
                    rps=rps,
                    duration=duration,
                    seed=options["seed"],
                    gzip=options["gzip"],
                    client=client,
                    drift=drift,
                    stop=stop,
                )
                return
            self._run(
                pipeline=pipeline,
                destination=destination,
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
        destination: Destination,
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
        provider, exporter = otlp_provider(
            endpoint=destination.endpoint,
            token=token,
            service=shape.service,
            rps=rps,
            gzip=gzip,
            protocol=destination.protocol,
        )
        # Seeds the shapes only: random ids keep two runs from colliding on the server.
        planner = TracePlanner(rng=random.Random(seed), shape=shape, switches=switches, drift=drift)
        self.stdout.write(
            f"Sending {rps:g} traces/s of “{pipeline.name}” as {shape.service} “{shape.root_span}” "
            f"to {destination} ({f'for {duration:g} s' if duration else 'Ctrl-C stops'})"
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
