"""Back-tested against real changes: each simulator switch predicted from traffic sent
without it is within 5 % of the traffic sent with it, at p50, p95 and p99."""

import pytest

from tests.whatif.backtest import SHOWN, backtest

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def test_each_switch_is_predicted_within_five_percent_of_what_it_does() -> None:
    result = backtest(traces=2000, seed=17, paired=True)

    report = {arm.name: {p: arm.error_pct(p) for p in SHOWN} for arm in result.arms}
    for errors in report.values():
        assert all(abs(error) <= 5 for error in errors.values()), report
    # Each switch did make requests faster: the comparison is not of a no-op.
    for arm in result.arms:
        assert arm.observed["p50"] < result.baseline["p50"], arm
