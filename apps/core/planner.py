"""PostgreSQL planner settings for the statements of one block.

For a filter whose selectivity PostgreSQL cannot estimate (containment in an array
under a GIN index), a reader that has counted the matches itself tells the planner
which kind of plan to take, instead of letting a wrong guess walk a whole team's rows.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction

# The switches a reader may turn: plan kinds, nothing that changes a result.
SWITCHES = frozenset(
    {"enable_bitmapscan", "enable_indexscan", "enable_indexonlyscan", "enable_seqscan",
     "enable_sort", "enable_hashjoin", "enable_mergejoin", "jit"}
)  # fmt: skip


@contextmanager
def planner_settings(**switches: bool) -> Iterator[None]:
    """Plan the block's statements with these switches (``enable_seqscan=False``, …).

    ``SET LOCAL`` in a transaction (a savepoint when one is open), set back to the
    server's defaults when the block ends; a failure rolls them back with it.
    """
    unknown = set(switches) - SWITCHES
    if unknown:
        raise ValueError(f"Not a planner switch: {', '.join(sorted(unknown))}")
    # A plan kind turned off still costs ten billion where nothing else can do: past
    # jit_above_cost, PostgreSQL would spend a fifth of a second compiling the query.
    switches = {**switches, "jit": False}
    # One round trip each way: the names come from SWITCHES, the values are on or off.
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "; ".join(f"SET LOCAL {n} = {'on' if on else 'off'}" for n, on in switches.items())
            )
        yield
        with connection.cursor() as cursor:
            cursor.execute("; ".join(f"SET LOCAL {name} TO DEFAULT" for name in switches))
