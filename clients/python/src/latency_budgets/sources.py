"""Where a client's figures come from: the server's runtime documents, refreshed in the
background, or a file read once.

``figures(slug)`` is on every request's path, so it never waits: it answers from what
the source holds (None before the first document) and, for the server, asks the
refresher to fetch a pipeline it has not seen yet.
"""

import http.client
import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from latency_budgets.figures import (
    DocumentError,
    PipelineFigures,
    figures_from_configuration,
    figures_from_document,
)

logger = logging.getLogger("latency_budgets")

USER_AGENT = "latency-budgets-python/0.1"
# A document larger than this is no runtime document; refused rather than read.
MAX_DOCUMENT_BYTES = 1 << 20
FIRST_RETRY_S = 1.0
MAX_RETRY_S = 60.0


class Source(Protocol):
    def figures(self, slug: str) -> PipelineFigures | None: ...

    def close(self) -> None: ...


class StaticSource:
    """Figures fixed at construction: from a file, or given by the application."""

    def __init__(self, figures: Iterable[PipelineFigures]) -> None:
        self._figures = {item.slug: item for item in figures}

    def figures(self, slug: str) -> PipelineFigures | None:
        return self._figures.get(slug)

    def close(self) -> None:
        pass


def source_from_file(path: str | Path) -> StaticSource:
    """The ``pipelines`` of the team's configuration file (YAML or JSON)."""
    text = Path(path).read_text(encoding="utf-8")
    if str(path).endswith(".json"):
        data: Any = json.loads(text)
    else:
        try:
            import yaml
        except ImportError as exc:  # pragma: no cover - depends on the installation
            raise DocumentError(
                "Reading a YAML file needs PyYAML: pip install 'latency-budgets[yaml]'."
            ) from exc
        data = yaml.safe_load(text)
    if not isinstance(data, Mapping) or not isinstance(data.get("pipelines"), list):
        raise DocumentError(f"{path}: no `pipelines` list in this file.")
    return StaticSource(figures_from_configuration(item) for item in data["pipelines"])


class _Entry:
    __slots__ = ("etag", "figures", "next_at", "retry_s")

    def __init__(self) -> None:
        self.figures: PipelineFigures | None = None
        self.etag: str | None = None
        self.next_at = 0.0
        self.retry_s = FIRST_RETRY_S


class ServerSource:
    """Runtime documents from ``{url}/v1/budgets/{pipeline}``, kept fresh by one thread.

    A pipeline is fetched once asked for (or named up front), then every ``refresh_s``
    the document gives, with ``If-None-Match``. A failed fetch keeps the last document
    and tries again after a delay that doubles up to a minute.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        pipelines: Iterable[str] = (),
        timeout_s: float = 2.0,
        start: bool = True,
    ) -> None:
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"The server's URL must be http or https, not {url!r}.")
        self._base = url.rstrip("/") + "/v1/budgets/"
        self._token = token
        self._timeout_s = timeout_s
        self._entries: dict[str, _Entry] = {slug: _Entry() for slug in pipelines}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._ready = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        if start:
            self.start()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="latency-budgets-refresh", daemon=True
            )
            self._thread.start()

    def figures(self, slug: str) -> PipelineFigures | None:
        entry = self._entries.get(slug)
        if entry is None:
            with self._lock:
                if slug not in self._entries:
                    self._entries[slug] = _Entry()
            self._wake.set()
            return None
        return entry.figures

    def wait_ready(self, slugs: Iterable[str], timeout_s: float) -> bool:
        """Wait until each pipeline has a document; for start-up, never for a request."""
        wanted = list(slugs)
        for slug in wanted:
            self.figures(slug)
        deadline = time.monotonic() + timeout_s
        with self._ready:
            while any(self._entries[slug].figures is None for slug in wanted):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._ready.wait(left)
        return True

    def refresh(self, slug: str) -> bool:
        """Fetch one pipeline's document now; True when the source holds one after it."""
        self.figures(slug)
        entry = self._entries[slug]
        self._fetch(slug, entry)
        return entry.figures is not None

    def close(self) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self._timeout_s + 1)

    def _run(self) -> None:
        while not self._stopped.is_set():
            now = time.monotonic()
            with self._lock:
                due = [(s, e) for s, e in self._entries.items() if e.next_at <= now]
            for slug, entry in due:
                if self._stopped.is_set():
                    return
                try:
                    self._fetch(slug, entry)
                except Exception as exc:  # whatever a server answers, the refresher lives on
                    self._failed(slug, entry, repr(exc))
            with self._lock:
                upcoming = min((e.next_at for e in self._entries.values()), default=None)
            wait = 60.0 if upcoming is None else max(upcoming - time.monotonic(), 0.05)
            self._wake.wait(wait)
            self._wake.clear()

    def _fetch(self, slug: str, entry: _Entry) -> None:
        # The scheme was checked (http or https) when the source was made.
        request = urllib.request.Request(  # noqa: S310
            self._base + urllib.parse.quote(slug, safe=""),
            headers={
                "Authorization": f"Bearer {self._token}",
                "Accept": "application/json",
                "User-Agent": USER_AGENT,
                **({"If-None-Match": entry.etag} if entry.etag else {}),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:  # noqa: S310
                body = response.read(MAX_DOCUMENT_BYTES + 1)
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise DocumentError("document: larger than a runtime document can be.")
                figures = figures_from_document(json.loads(body))
                etag = response.headers.get("ETag")
        except urllib.error.HTTPError as exc:
            if exc.code == 304 and entry.figures is not None:
                self._schedule(entry, entry.figures.refresh_s)
                return
            retry_after = _retry_after(exc.headers.get("Retry-After"))
            self._failed(slug, entry, f"HTTP {exc.code}", at_least=retry_after)
            return
        except (OSError, ValueError, RecursionError, http.client.HTTPException) as exc:
            # Unreachable, timed out, no HTTP, not JSON, nested past the parser, not v1.
            self._failed(slug, entry, str(exc) or type(exc).__name__)
            return
        with self._ready:
            entry.figures = figures
            entry.etag = etag
            self._ready.notify_all()
        entry.retry_s = FIRST_RETRY_S
        self._schedule(entry, figures.refresh_s)

    def _schedule(self, entry: _Entry, after_s: float) -> None:
        entry.next_at = time.monotonic() + after_s

    def _failed(self, slug: str, entry: _Entry, why: str, *, at_least: float = 0.0) -> None:
        logger.warning("latency budgets: runtime document of %s not refreshed: %s", slug, why)
        self._schedule(entry, max(entry.retry_s, at_least))
        entry.retry_s = min(entry.retry_s * 2, MAX_RETRY_S)


def _retry_after(value: str | None) -> float:
    try:
        return min(max(float(value or 0), 0.0), 3600.0)
    except ValueError:
        return 0.0
