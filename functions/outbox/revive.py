"""Bring dead outbox items back to life once their sink is fixed (`umavez outbox revive`), and
hand a stuck one (pending outside the due index: its stream try was lost, as reconciliation
reports) to the sweeper the same way, and one sent without the e-mail it is owed (its order
learned its customer unseen) back for its e-mail.

A revived item is the same notification: same outbox id, so the same idempotency key every
sink dedupes on. Reviving is a conditional update that only acts on a `dead` item; it makes
the item `pending`, due now, in its own shard of the due index (the sweeper sends it), and
starts its give-up age again from `revived_at`. `attempts` starts again from 0, so the
backoff starts again at its base; what the item went through is kept in `revivals` (how many
times it was revived) and `last_error` (why it last failed), and the report says how many
attempts it had and when it died. The channels that took it before it died (`channels_sent`)
are kept: the sweeper sends it through the others only. Dead items are listed from the due
index's `dead` bucket, never by a scan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from functions.shared import tables
from functions.shared.outbox import EMAIL_OWED
from functions.store import queries
from functions.store.outbox import reopen_for_email, revive

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class ReviveResult(StrEnum):
    REVIVED = "revived"
    # Sent without the e-mail it is owed (reconciliation's `email_owed_outbox_item`): handed
    # back to the sweeper, which sends it through the e-mail only.
    REOPENED = "reopened"
    NOT_DEAD = "not_dead"  # pending, sending or sent: nothing to revive, left as it is
    NOT_FOUND = "not_found"


@dataclass(frozen=True)
class Revived:
    outbox_id: str
    result: ReviveResult
    # The status found when it was not dead; for a revived item, what it had when it died.
    status: str | None = None
    attempts: int | None = None
    died_at: int | None = None
    last_error: str | None = None


class OutboxReviver:
    def __init__(
        self,
        dynamodb: DynamoDBClient,
        table_name: str,
        clock: Callable[[], float],
        page_size: int = 100,
    ) -> None:
        self._db = dynamodb
        self._table = table_name
        self._clock = clock
        self._page_size = page_size

    def revive(self, outbox_id: str) -> Revived:
        now = self._clock()
        revival = revive(self._db, self._table, outbox_id, now)
        if not revival.held:
            if not revival.item:
                return Revived(outbox_id, ReviveResult.NOT_FOUND)
            status = revival.item.get("status")
            if revival.item.get(EMAIL_OWED) and reopen_for_email(
                self._db, self._table, outbox_id, now
            ):
                return Revived(outbox_id, ReviveResult.REOPENED, status=status)
            return Revived(outbox_id, ReviveResult.NOT_DEAD, status=status)
        before = revival.item
        return Revived(
            outbox_id,
            ReviveResult.REVIVED,
            status=before.get("status"),
            attempts=before.get("attempts"),
            died_at=before.get(tables.OUTBOX_DUE_AT),
            last_error=before.get("last_error"),
        )

    def dead(self) -> Iterator[str]:
        """Every dead item's id, oldest death first, page by page from the due index."""
        return queries.due_index_ids(
            self._db, self._table, tables.OUTBOX_DEAD_BUCKET, page_size=self._page_size
        )

    def revive_all_dead(self) -> list[Revived]:
        """Lists first, then revives: each revival moves its item out of the bucket being
        paged."""
        return [self.revive(outbox_id) for outbox_id in list(self.dead())]
