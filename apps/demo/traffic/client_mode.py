"""simulate_traffic's client mode: its options, and a run with what it prints."""

import threading
from argparse import ArgumentParser, BooleanOptionalAction
from dataclasses import dataclass
from typing import Any

from django.core.management.base import CommandError, OutputWrapper

from apps.demo.traffic.client_run import (
    ClientRunReport,
    requests_in_flight_checked,
    traffic_run_through_client,
)
from apps.demo.traffic.destination import Destination
from apps.demo.traffic.send import (
    FLUSH_AFTER_SIGNAL_TIMEOUT_S,
    FLUSH_TIMEOUT_S,
    drain,
    otlp_provider,
)
from apps.demo.traffic.slow_phases import SLOWED_STEPS, SlowPhases
from apps.demo.traffic.traffic_plan import Drift, Switches, shape_for_pipeline
from apps.pipelines.models import Pipeline

# How long a run waits for the pipeline's budgets before it starts anyway.
BUDGETS_WAIT_S = 10.0
MIN_SPEED = 0.01
MAX_SPEED = 10.0
# Left unset by default, so that a run in the other mode can tell they were given.
CLIENT_ONLY = (
    "metrics_token",
    "levers",
    "speed",
    "slow_every",
    "slow_for",
    "slow_first",
    "slow_factor",
    "slow_step",
)
SLOW_DEFAULTS = SlowPhases()


@dataclass(frozen=True)
class ClientOptions:
    levers: bool = True
    speed: float = 1.0
    slow: SlowPhases | None = None


def add_client_arguments(parser: ArgumentParser) -> None:
    group = parser.add_argument_group(
        "client mode",
        "--mode client serves each request in real time through the latency-budgets client "
        "(clients/python): a deadline from the server's budgets, a span per stage, and "
        "the levers: retrieval hedged after its p95, rerank skipped or capped, the answer "
        "falling back to a faster model when its first token is late.",
    )
    group.add_argument(
        "--metrics-token",
        help="Team metrics token the client reads the budgets with "
        "(default for the demo team: the one demo_setup saved).",
    )
    group.add_argument(
        "--levers",
        action=BooleanOptionalAction,
        help="Let the client act (default); --no-levers runs the same traffic as plain "
        "stages, to compare.",
    )
    group.add_argument(
        "--speed",
        type=float,
        metavar="FACTOR",
        help="Multiply every duration by this: 0.2 serves requests five times faster "
        "(the budgets stay as the server has them). Default: 1.",
    )
    group.add_argument(
        "--slow-every",
        type=float,
        metavar="SECONDS",
        help="A slow phase this often: the first retrieval attempt, or the primary "
        "model's first token, in turn, gets several times slower (default: no slow phases).",
    )
    group.add_argument(
        "--slow-for",
        type=float,
        metavar="SECONDS",
        help=f"How long each slow phase lasts (default: {SLOW_DEFAULTS.length_s:g} s).",
    )
    group.add_argument(
        "--slow-first",
        type=float,
        metavar="SECONDS",
        help="When the first slow phase starts, counted from the start (default: "
        f"{SLOW_DEFAULTS.first_s:g} s, which keeps the phases clear of --drift's defaults).",
    )
    group.add_argument(
        "--slow-factor",
        type=float,
        help=f"How many times slower (default: {SLOW_DEFAULTS.factor:g}).",
    )
    group.add_argument(
        "--slow-step",
        action="append",
        choices=SLOWED_STEPS,
        help="What a slow phase slows; repeat it to take turns (default: retrieval, then ttft).",
    )


def client_only_options_given(options: dict[str, Any]) -> list[str]:
    """The client mode's options given on the command line, as flags."""
    return [f"--{name.replace('_', '-')}" for name in CLIENT_ONLY if options.get(name) is not None]


def client_mode_options(
    options: dict[str, Any], *, client: bool, switches: Switches, pipeline: Pipeline
) -> ClientOptions | None:
    """The client mode's options, checked against the rest; None in replay mode, which
    takes none of them."""
    if not client:
        given = client_only_options_given(options)
        if given:
            raise CommandError(f"{', '.join(given)}: only with --mode client.")
        return None
    if switches != Switches():
        raise CommandError(
            "The pipeline changes (--skip-rerank and the others) are for --mode replay."
        )
    try:
        checked = client_options(options)
        requests_in_flight_checked(pipeline=pipeline, rps=options["rps"], speed=checked.speed)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    return checked


def client_options(options: dict[str, Any]) -> ClientOptions:
    """The client mode's options, checked; ValueError names what cannot be."""
    speed = 1.0 if options["speed"] is None else options["speed"]
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise ValueError(f"--speed is between {MIN_SPEED:g} and {MAX_SPEED:g}, not {speed:g}.")
    slow = None
    if options["slow_every"] is not None:
        slow = SlowPhases(
            every_s=options["slow_every"],
            length_s=_or(options["slow_for"], SLOW_DEFAULTS.length_s),
            first_s=_or(options["slow_first"], SLOW_DEFAULTS.first_s),
            factor=_or(options["slow_factor"], SLOW_DEFAULTS.factor),
            steps=tuple(options["slow_step"] or SLOW_DEFAULTS.steps),
        )
    else:
        orphans = [
            flag
            for flag in client_only_options_given(options)
            if flag.startswith("--slow-") and flag != "--slow-every"
        ]
        if orphans:
            raise ValueError(f"{', '.join(orphans)} need --slow-every.")
    return ClientOptions(
        levers=options["levers"] is not False,
        speed=speed,
        slow=slow,
    )


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def run_client_mode(
    *,
    out: OutputWrapper,
    pipeline: Pipeline,
    destination: Destination,
    token: str,
    metrics_token: str,
    rps: float,
    duration: float | None,
    seed: int | None,
    gzip: bool,
    client: ClientOptions,
    drift: Drift | None,
    stop: threading.Event,
) -> ClientRunReport:
    """Serve the traffic through the client with the SDK's exporter, drain it, and print
    what was sent and decided. The client reads the budgets from the destination's HTTP
    side, whichever way the spans go."""
    shape = shape_for_pipeline(pipeline=pipeline)
    base_url = destination.base_url
    provider, exporter = otlp_provider(
        endpoint=destination.endpoint,
        token=token,
        service=shape.service,
        rps=rps,
        gzip=gzip,
        protocol=destination.protocol,
    )
    levers = "levers on" if client.levers else "no levers"
    out.write(
        f"Serving {rps:g} requests/s of “{pipeline.name}” through the latency-budgets client "
        f"({levers}, speed {client.speed:g}) as {shape.service} “{shape.root_span}” to "
        f"{destination} ({f'for {duration:g} s' if duration else 'Ctrl-C stops'})"
    )
    slow = client.slow
    if slow is not None:
        out.write(
            f"{', then '.join(slow.steps)} {slow.factor:g}x slower for {slow.length_s:g} s "
            f"every {slow.every_s:g} s, the first time {slow.first_s:g} s from now"
        )
    if drift is not None:
        out.write(
            f"{drift.step} drifts {drift.factor:g}x slower for {drift.length_s:g} s every "
            f"{drift.every_s:g} s, the first time {drift.first_s:g} s from now"
        )

    def budgets_arrived(ready: bool) -> None:
        if not ready:
            out.write(
                f"No budgets from {base_url}/v1/budgets/{pipeline.slug} yet: the client acts "
                "once they come."
            )

    try:
        report = traffic_run_through_client(
            url=base_url,
            metrics_token=metrics_token,
            pipeline=pipeline,
            provider=provider,
            rps=rps,
            duration=duration,
            stop=stop,
            levers=client.levers,
            speed=client.speed,
            slow=slow,
            drift=drift,
            seed=seed,
            ready_timeout_s=BUDGETS_WAIT_S,
            on_ready=budgets_arrived,
        )
    finally:
        timeout = FLUSH_AFTER_SIGNAL_TIMEOUT_S if stop.is_set() else FLUSH_TIMEOUT_S
        drain(provider=provider, exporter=exporter, timeout=timeout)
    for line in report.lines():
        out.write(line)
    out.write(
        f"{exporter.exported_spans} spans exported; export failures: "
        f"{exporter.failed_batches} ({exporter.failed_spans} spans)"
    )
    return report
