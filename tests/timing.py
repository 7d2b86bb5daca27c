"""Durations for test data, in the units the code under test keeps them.

Span and trace times, stage samples and rollup sums are integer nanoseconds; rollup
resolutions and bucket starts are whole seconds, hence the ``_S`` set beside.
"""

# Nanoseconds.
MS = 1_000_000
S = 1_000 * MS
MINUTE = 60 * S
HOUR = 60 * MINUTE
DAY = 24 * HOUR

# Seconds.
MINUTE_S = 60
HOUR_S = 60 * MINUTE_S
DAY_S = 24 * HOUR_S
