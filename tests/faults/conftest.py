"""The stack the fault cases share, and each case's result.

The stack starts with the first fault test and stops after the last (module scope), so
that it does not run on beside the rest of the suite. A case runs the first time one of
its tests asks for it; its other tests judge the same run.
"""

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings

from tests.alerts.receivers import HttpReceiver
from tests.faults.cases import CaseResult, case_run, results_write
from tests.faults.faults import Inject
from tests.faults.servers import PrivateRedis
from tests.faults.stack import Stack

RESULTS_PATH = Path(settings.VAR_DIR) / "faults" / "results.json"


@pytest.fixture(scope="module")
def fault_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # The servers' files live outside pytest's directory, which pytest keeps to its own
    # user (mode 700): as root, PostgreSQL runs as another user, who must reach them.
    # The logs stay with pytest's other files, for a failed run to be read.
    root = Path(tempfile.mkdtemp(prefix="latency-budgets-faults-"))
    stack = Stack(
        root, logs=tmp_path_factory.mktemp("faults"), redis_binary=PrivateRedis.binary_found()
    )
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def fault_receiver() -> Iterator[HttpReceiver]:
    receiver = HttpReceiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="module")
def fault_case(
    fault_stack: Stack, fault_receiver: HttpReceiver
) -> Callable[[str, str, Inject, bool], CaseResult]:
    runs: dict[str, CaseResult | BaseException] = {}

    def run(key: str, name: str, inject: Inject, hold_alert: bool) -> CaseResult:
        if key not in runs:
            try:
                runs[key] = case_run(
                    fault_stack,
                    fault_receiver,
                    key=key,
                    name=name,
                    inject=inject,
                    hold_alert=hold_alert,
                )
            except Exception as exc:  # every test of the case reports the same failure
                runs[key] = exc
            else:
                result = runs[key]
                assert isinstance(result, CaseResult)
                results_write(RESULTS_PATH, result)
        outcome = runs[key]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return run
