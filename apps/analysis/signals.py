"""What analysis tells the steps after it, without importing them."""

from django.dispatch import Signal

# Sent after a finalization pass whose stage samples (and dirty buckets) committed.
samples_committed = Signal()
