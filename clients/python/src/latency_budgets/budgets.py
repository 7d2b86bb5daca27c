"""The client's entry point: where budgets come from, and the requests that use them."""

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider

from latency_budgets.decisions import Ledger
from latency_budgets.figures import PipelineFigures, figures_from_document
from latency_budgets.request import Request
from latency_budgets.sources import ServerSource, Source, StaticSource, source_from_file

VERSION = "0.1.0"


class Budgets:
    """Budgets of a team's pipelines, and ``request()`` to run one under its deadline.

    Spans go to ``tracer_provider`` when given, else to the global one; while no SDK is
    installed (the API's default provider) nothing is recorded, and the deadlines and
    levers still work, at the cost of a clock read per stage.

    ``holdout_percent``: the share of requests run without levers, the control group that
    tells what the levers save; by default the runtime document's.
    """

    def __init__(
        self,
        source: Source,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        holdout_percent: float | None = None,
    ):
        if holdout_percent is not None and not 0 <= holdout_percent <= 100:
            raise ValueError("holdout_percent is a share from 0 to 100.")
        self.source = source
        self._holdout_percent = holdout_percent
        self.ledger = Ledger()
        self._fixed_provider = tracer_provider
        self._provider: object = None
        self._tracer: trace.Tracer | None = None

    @classmethod
    def from_server(
        cls,
        url: str,
        token: str,
        *,
        pipelines: Iterable[str] = (),
        timeout_s: float = 2.0,
        tracer_provider: trace.TracerProvider | None = None,
        holdout_percent: float | None = None,
    ) -> "Budgets":
        """Runtime documents from the server at ``url`` with the team's metrics token."""
        source = ServerSource(url, token, pipelines=pipelines, timeout_s=timeout_s)
        return cls(source, tracer_provider=tracer_provider, holdout_percent=holdout_percent)

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        holdout_percent: float | None = None,
    ) -> "Budgets":
        """Budgets from the team's configuration file, offline (no observed times)."""
        return cls(
            source_from_file(path),
            tracer_provider=tracer_provider,
            holdout_percent=holdout_percent,
        )

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Mapping[str, Any] | PipelineFigures],
        *,
        tracer_provider: trace.TracerProvider | None = None,
        holdout_percent: float | None = None,
    ) -> "Budgets":
        """Budgets from runtime documents the application already holds."""
        figures = [
            item if isinstance(item, PipelineFigures) else figures_from_document(item)
            for item in documents
        ]
        return cls(
            StaticSource(figures),
            tracer_provider=tracer_provider,
            holdout_percent=holdout_percent,
        )

    def request(
        self,
        pipeline: str,
        *,
        budget_ms: float | None = None,
        deadline_unix_ms: float | None = None,
    ) -> Request:
        """A request of ``pipeline``: ``with budgets.request("rag-chat") as req:``.

        Its deadline is the earliest of a caller's (from baggage), ``deadline_unix_ms``,
        its start plus ``budget_ms`` and its start plus the pipeline's ``deadline_ms``.
        """
        return Request(
            self,
            pipeline,
            self.source.figures(pipeline),
            budget_ms=budget_ms,
            deadline_unix_ms=deadline_unix_ms,
        )

    def wait_ready(self, pipelines: Iterable[str], timeout_s: float = 5.0) -> bool:
        """At start-up: wait for the server's documents (True once all are here)."""
        if isinstance(self.source, ServerSource):
            return self.source.wait_ready(pipelines, timeout_s)
        return all(self.source.figures(slug) is not None for slug in pipelines)

    def holdout_percent(self, figures: PipelineFigures | None) -> float:
        """The share of a pipeline's requests to run without levers, in percent."""
        if self._holdout_percent is not None:
            return self._holdout_percent
        return 0.0 if figures is None else figures.holdout_percent

    def tracer(self) -> trace.Tracer | None:
        """The tracer for the current provider; None while no SDK is installed."""
        provider = self._fixed_provider or trace.get_tracer_provider()
        if provider is not self._provider:
            self._provider = provider
            recording = not isinstance(provider, ProxyTracerProvider | NoOpTracerProvider)
            self._tracer = provider.get_tracer("latency_budgets", VERSION) if recording else None
        return self._tracer

    def close(self) -> None:
        self.source.close()
