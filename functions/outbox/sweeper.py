"""Re-drive outbox items the stream did not finish: sends that failed and backed off (the
sweeper owns their schedule), leases that ran out after a crash, and stream records that aged
out (streams keep records 24 h). Items past the give-up age die in the sender, not here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final

from functions.outbox.sender import OutboxSender
from functions.shared import tables
from functions.store import queries

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# An item the sender raised on (a bug, a crash of one channel): counted, and left as it is;
# if it was claimed, its lease runs out and a later sweep re-drives it.
SWEEP_ERROR: Final = "error"
# The sweep stopped before an item because too little time was left for one: the items not
# reached stay due, for the next sweep.
SWEEP_CUT_SHORT: Final = "cut_short"

OnError = Callable[[str, Exception], None]


def _ignore(_outbox_id: str, _error: Exception) -> None:
    return None


class Sweeper:
    def __init__(
        self,
        dynamodb: DynamoDBClient,
        table_name: str,
        sender: OutboxSender,
        clock: Callable[[], float],
        grace_seconds: int = 120,
        max_items: int = 1000,
        on_error: OnError = _ignore,
    ) -> None:
        self._db = dynamodb
        self._table = table_name
        self._sender = sender
        self._clock = clock
        self._grace = grace_seconds
        self._max_items = max_items
        self._on_error = on_error

    def sweep(self, has_time: Callable[[], bool] = lambda: True) -> Counter[str]:
        """Counts of what happened to each due item, by SendResult value (or SWEEP_ERROR, and
        SWEEP_CUT_SHORT once if it stopped for time).

        One bad item never stops the sweep: whatever it raises is reported through on_error
        (called inside the except block, so a logger can record the traceback) and the sweep
        goes on with the next one. `has_time` is asked before each item: a timeout mid-item
        would leave its sends unrecorded, and the item is sent again when its lease ends.
        """
        results: Counter[str] = Counter()
        for outbox_id in self._due_items():
            if not has_time():
                results[SWEEP_CUT_SHORT] += 1
                break
            try:
                sent = self._sender.deliver(outbox_id, only_if_due=True)
            except Exception as exc:  # noqa: BLE001 - reported, and the lease re-drives it
                results[SWEEP_ERROR] += 1
                self._on_error(outbox_id, exc)
                continue
            results[sent.result.value] += 1
        return results

    def _due_items(self) -> Iterator[str]:
        """Every shard of the due index (never the `dead` bucket), each oldest first; the
        grace leaves fresh items to the stream. At most max_items per shard in one sweep."""
        cutoff = int(self._clock()) - self._grace
        for bucket in tables.due_buckets():
            yield from queries.due_index_ids(
                self._db, self._table, bucket, due_by=cutoff, max_items=self._max_items
            )
