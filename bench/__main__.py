"""Run the benchmarks: ``python -m bench [name ...]`` (``make bench``).

Each benchmark prints a table and writes ``bench/results/<name>.json``.
"""

import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "budgets_site.settings_test")
django.setup()

from bench import (  # noqa: E402
    alerts,
    dashboards,
    decode,
    evaluation,
    ingest,
    pages,
    percentiles,
    rollup,
    sketch,
)

BENCHMARKS = {
    "pages": pages.run,
    "decode": decode.run,
    "sketch": sketch.run,
    "ingest": ingest.run,
    "rollup": rollup.run,
    "percentiles": percentiles.run,
    "evaluation": evaluation.run,
    "dashboards": dashboards.run,
    "alerts": alerts.run,
}


def main(argv: list[str]) -> int:
    names = argv or list(BENCHMARKS)
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
        return 2
    for name in names:
        BENCHMARKS[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
