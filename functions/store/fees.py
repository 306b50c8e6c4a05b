"""A statement line's fee and net, recorded once onto its order."""

from __future__ import annotations

from collections.abc import Mapping

from functions.shared import tables
from functions.shared.dynamo import to_attributes
from functions.store.transaction import Placed, Slot, Transaction


def fee_record(
    ledger: str,
    order_id: str,
    line_item: Mapping[str, object],
    *,
    fee: int,
    net: int,
    currency: str,
) -> Transaction:
    """The line's item, written once (its key names the line), and the order's totals moved by
    it in the same transaction: a line read again adds nothing, and an order that is gone is
    not created by its fee."""
    order_key = {
        tables.PARTITION_KEY: tables.order_pk(order_id),
        tables.SORT_KEY: tables.ORDER_SORT,
    }
    return Transaction.of(
        Placed(
            Slot.FEE,
            {
                "Put": {
                    "TableName": ledger,
                    "Item": to_attributes(line_item),
                    "ConditionExpression": "attribute_not_exists(#pk)",
                    "ExpressionAttributeNames": {"#pk": tables.PARTITION_KEY},
                }
            },
        ),
        Placed(
            Slot.ORDER,
            {
                "Update": {
                    "TableName": ledger,
                    "Key": to_attributes(order_key),
                    "UpdateExpression": "ADD fee_total :fee, net_total :net "
                    "SET settlement_currency = if_not_exists(settlement_currency, :cur)",
                    "ConditionExpression": "attribute_exists(#pk)",
                    "ExpressionAttributeNames": {"#pk": tables.PARTITION_KEY},
                    "ExpressionAttributeValues": to_attributes(
                        {":fee": fee, ":net": net, ":cur": currency}
                    ),
                }
            },
        ),
    )
