"""What rollups tell the steps after them, without importing them."""

from django.dispatch import Signal

# Sent once an evaluation that opened, closed or followed violations has committed, with
# ``pipeline_ids``: the pipelines whose violations changed.
violations_changed = Signal()
