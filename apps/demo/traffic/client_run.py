"""Demo traffic served in real time through the latency-budgets client.

Requests start at a steady rate, each on a thread of its own (as a web server's worker
would serve it) from a pool sized for the requests in flight. The budgets come from the
server's runtime document with a metrics token; the spans go through the tracer
provider the caller made, so they reach ``/v1/traces`` like any service's.
"""

import math
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from latency_budgets import Budgets
from opentelemetry.sdk.trace import TracerProvider

from apps.demo.traffic.client_app import DemoApplication, RequestJob, RequestOutcome
from apps.demo.traffic.client_report import ClientRunReport, RequestTally
from apps.demo.traffic.planned_steps import planned_request
from apps.demo.traffic.slow_phases import SlowPhases
from apps.demo.traffic.traffic_plan import Drift, Profile, TracePlanner, shape_for_pipeline
from apps.pipelines.models import Pipeline

# Requests in flight at once, past which the run is refused: the client runs the
# levers' attempts on a pool of its own (64 threads), about one per request in flight.
MAX_IN_FLIGHT = 48
# The pool holds this many times the requests a typical duration keeps in flight: slow
# phases without levers make requests twice as long.
IN_FLIGHT_HEADROOM = 3
# At a stop (Ctrl-C), requests under way get this long to finish before they are cut
# short; honcho's grace for the whole command is 8 s.
FINISH_AFTER_STOP_S = 2.5
# At the end of --duration they get this long, then they are cut short too.
FINISH_AT_END_S = 30.0


def requests_in_flight_checked(
    *, pipeline: Pipeline, rps: float, speed: float, profile: Profile | None = None
) -> int:
    """Threads the run needs: ``rps`` times a typical request's duration (the planner's
    median), with room for the slow phases; ValueError past ``MAX_IN_FLIGHT``."""
    sampler = TracePlanner(
        rng=random.Random(0), shape=shape_for_pipeline(pipeline=pipeline), profile=profile
    )
    durations = sorted(sampler.plan().root.end_ms for _ in range(200))
    typical_s = durations[len(durations) // 2] / 1000 * speed
    in_flight = math.ceil(rps * typical_s * IN_FLIGHT_HEADROOM) + 1
    if in_flight > MAX_IN_FLIGHT:
        raise ValueError(
            f"{rps:g} requests/s at speed {speed:g} keep about {in_flight} requests in flight, "
            f"more than the {MAX_IN_FLIGHT} the client's levers serve at once here: "
            "lower --rps or --speed."
        )
    return in_flight


def traffic_run_through_client(
    *,
    url: str,
    metrics_token: str,
    pipeline: Pipeline,
    provider: TracerProvider,
    rps: float,
    duration: float | None,
    stop: threading.Event,
    levers: bool = True,
    speed: float = 1.0,
    slow: SlowPhases | None = None,
    drift: Drift | None = None,
    profile: Profile | None = None,
    seed: int | None = None,
    ready_timeout_s: float = 5.0,
    on_ready: Callable[[bool], None] | None = None,
) -> ClientRunReport:
    """Serve ``rps`` requests a second of ``pipeline`` through the client until
    ``duration`` seconds have passed or ``stop`` is set; the spans go to ``provider``,
    which the caller drains. ``on_ready`` hears whether the budgets arrived in time."""
    in_flight = requests_in_flight_checked(pipeline=pipeline, rps=rps, speed=speed, profile=profile)
    shape = shape_for_pipeline(pipeline=pipeline)
    planner = TracePlanner(rng=random.Random(seed), shape=shape, profile=profile, drift=drift)
    budgets = Budgets.from_server(
        url, metrics_token, pipelines=[pipeline.slug], tracer_provider=provider
    )
    try:
        ready = _wait_for_budgets(budgets, pipeline.slug, timeout_s=ready_timeout_s, stop=stop)
        if on_ready is not None:
            on_ready(ready)
        tally, not_sent, elapsed_s = _serve_paced(
            budgets=budgets,
            provider=provider,
            planner=planner,
            pipeline=pipeline.slug,
            rps=rps,
            duration=duration,
            stop=stop,
            levers=levers,
            speed=speed,
            slow=slow,
            in_flight=in_flight,
        )
        figures = budgets.source.figures(pipeline.slug)
    finally:
        budgets.close()
    counts, saved = budgets.ledger.counts(), budgets.ledger.saved_ms()
    return ClientRunReport(
        pipeline=pipeline.slug,
        requests=tally.outcomes["requests"],
        failed=tally.outcomes["failed"],
        with_deadline=tally.outcomes["with_deadline"],
        within_deadline=tally.outcomes["within_deadline"],
        cut_short=tally.outcomes["cut_short"],
        broken=tally.outcomes["broken"],
        holdout=tally.outcomes["holdout"],
        not_sent=not_sent,
        elapsed_s=elapsed_s,
        deadline_ms=None if figures is None else figures.deadline_ms,
        decisions={(stage, action): count for (_p, stage, action), count in counts.items()},
        saved_ms={(stage, action): ms for (_p, stage, action), ms in saved.items()},
        first_error=tally.first_error,
    )


def _wait_for_budgets(
    budgets: Budgets, slug: str, *, timeout_s: float, stop: threading.Event
) -> bool:
    """Whether the pipeline's runtime document came within ``timeout_s``; a stop (Ctrl-C
    at start-up) ends the wait at once."""
    deadline = time.monotonic() + timeout_s
    while not stop.is_set():
        left = deadline - time.monotonic()
        if budgets.wait_ready([slug], timeout_s=max(min(left, 0.25), 0.0)):
            return True
        if left <= 0:
            return False
    return False


def _serve_paced(
    *,
    budgets: Budgets,
    provider: TracerProvider,
    planner: TracePlanner,
    pipeline: str,
    rps: float,
    duration: float | None,
    stop: threading.Event,
    levers: bool,
    speed: float,
    slow: SlowPhases | None,
    in_flight: int,
) -> tuple[RequestTally, int, float]:
    """Start a request every 1/``rps`` s on a thread of the pool; return the outcomes, the
    requests not sent for want of a thread, and the seconds it ran."""
    abort = threading.Event()
    application = DemoApplication(
        budgets=budgets,
        tracer=provider.get_tracer("latency_budgets.demo"),
        pipeline=pipeline,
        levers=levers,
        speed=speed,
        abort=abort,
    )
    tally = RequestTally()
    slots = threading.BoundedSemaphore(in_flight)
    pool = ThreadPoolExecutor(in_flight, thread_name_prefix="demo-request")
    started = time.monotonic()

    def serve(job: RequestJob) -> RequestOutcome:
        try:
            return application.serve(job)
        finally:
            slots.release()

    interval = 1.0 / rps
    due = started
    not_sent = 0
    try:
        while not stop.is_set():
            now = time.monotonic()
            elapsed = now - started
            if duration is not None and elapsed >= duration:
                break
            if due > now:
                stop.wait(due - now)
                continue
            if not slots.acquire(timeout=interval):
                not_sent += 1
                due = max(due + interval, now - 1.0)
                continue
            # Planned here, on one thread: the planner is not shared between threads.
            job = RequestJob(
                planned=planned_request(planner.plan(elapsed_s=elapsed)),
                spare=planned_request(planner.plan(elapsed_s=elapsed)),
                slow_step=None if slow is None else slow.step_at(elapsed),
                slow_factor=1.0 if slow is None else slow.factor,
            )
            pool.submit(serve, job).add_done_callback(tally.add)
            # After a stall, carry on at the rate instead of bursting to catch up.
            due = max(due + interval, now - 1.0)
    finally:
        _finish(slots, in_flight, FINISH_AFTER_STOP_S if stop.is_set() else FINISH_AT_END_S)
        abort.set()
        pool.shutdown(wait=True)
    return tally, not_sent, time.monotonic() - started


def _finish(slots: threading.BoundedSemaphore, size: int, timeout_s: float) -> None:
    """Wait until every request under way has finished, or ``timeout_s`` has passed."""
    deadline = time.monotonic() + timeout_s
    taken = 0
    while taken < size:
        left = deadline - time.monotonic()
        if left <= 0 or not slots.acquire(timeout=left):
            break
        taken += 1
    for _ in range(taken):
        slots.release()
