"""Run the benchmarks: ``python -m bench [name ...]`` (``make bench``).

Each benchmark prints a table and writes ``bench/results/<name>.json``.
"""

import os
import sys
from collections.abc import Callable

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "budgets_site.settings_test")
django.setup()

from bench import (  # noqa: E402
    alerts,
    attribution,
    client,
    dashboards,
    decode,
    evaluation,
    ingest,
    pages,
    percentiles,
    rollup,
    sketch,
    soak,
    tracelist,
    whatif,
    whatif_serving,
)

BENCHMARKS: dict[str, Callable[[], int | None]] = {
    "pages": pages.run,
    "decode": decode.run,
    "attribution": attribution.run,
    "sketch": sketch.run,
    "client": client.run,
    "ingest": ingest.run,
    "rollup": rollup.run,
    "percentiles": percentiles.run,
    "evaluation": evaluation.run,
    "dashboards": dashboards.run,
    "tracelist": tracelist.run,
    "alerts": alerts.run,
    "whatif": whatif.run,
    "whatif_serving": whatif_serving.run,
    "soak": soak.run,
}
# Run only when named: half an hour of the whole stack (``python -m bench soak``).
OPT_IN = {"soak"}


def main(argv: list[str]) -> int:
    names = argv or [name for name in BENCHMARKS if name not in OPT_IN]
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
        return 2
    status = 0
    for name in names:
        # A benchmark with checks of its own (soak) returns non-zero when one fails.
        status = max(status, BENCHMARKS[name]() or 0)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
