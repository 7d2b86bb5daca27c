"""What a cut call would still have taken: a lever's estimate of the time it saved.

A call cut after running ``elapsed`` would have gone on for ``T - elapsed``, ``T`` being
its whole time, which nobody will know. The estimate is the expected rest given that it
had run that long, ``E[T - elapsed | T > elapsed]``, with ``T`` lognormal through the
stage's p50 and p99 (``docs/runtime.md``): a call cut early, near the median, is
expected to end soon; one cut far in the tail, to take longer still. The p99 alone
(``p99 - elapsed``) would say a call past its p99 saved nothing, and one cut at its
median saved the whole tail.
"""

import math

# The standard normal's 0.99 quantile: the lognormal's spread is (ln p99 - ln p50) / Z99.
Z99 = 2.3263478740408408
# Past this many standard deviations the tail's probability underflows; there the
# expected rest follows its asymptote, elapsed * s / (z - s).
FAR_TAIL_Z = 30.0
_SQRT2 = math.sqrt(2.0)


def _upper(x: float) -> float:
    """P(Z > x) for a standard normal Z."""
    return 0.5 * math.erfc(x / _SQRT2)


def expected_rest_ms(p50: float | None, p99: float | None, elapsed_ms: float) -> float:
    """``E[T - elapsed | T > elapsed]`` in ms for ``T`` lognormal through ``p50`` and
    ``p99``; without both figures, ``p99 - elapsed``; never negative."""
    if p99 is None:
        return 0.0
    if p50 is None or p50 <= 0 or p99 <= p50:
        # No spread to fit: the one figure there is.
        return max(p99 - elapsed_ms, 0.0)
    mu = math.log(p50)
    s = (math.log(p99) - mu) / Z99
    mean = math.exp(mu + s * s / 2)
    if elapsed_ms <= 0:
        return mean
    z = (math.log(elapsed_ms) - mu) / s
    if z >= FAR_TAIL_Z:
        return elapsed_ms * s / max(z - s, 1.0)
    # E[T | T > e] = E[T] * P(Z > z - s) / P(Z > z), the lognormal's partial expectation.
    conditional = mean * _upper(z - s) / _upper(z)
    return max(conditional - elapsed_ms, 0.0)
