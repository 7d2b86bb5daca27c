"""Hypothesis profiles for the fuzz suite.

``fuzz`` (the default) keeps the suite quick on a small machine; ``HYPOTHESIS_PROFILE=long``
runs many more examples for a deeper search. The profile is applied per test through
``FUZZ``, so that the suite's other property tests keep their own settings.
"""

import os
from datetime import timedelta

from hypothesis import HealthCheck, settings

settings.register_profile(
    "fuzz",
    max_examples=200,
    # Generous: a decoder or request that takes this long on one example is a finding.
    deadline=timedelta(seconds=2),
    # Examples share the test's database and cache, which is what the endpoint tests want;
    # drawing hostile bodies and documents is slow by nature.
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
    print_blob=True,
)
settings.register_profile("long", parent=settings.get_profile("fuzz"), max_examples=5000)

FUZZ = settings.get_profile("long" if os.environ.get("HYPOTHESIS_PROFILE") == "long" else "fuzz")
