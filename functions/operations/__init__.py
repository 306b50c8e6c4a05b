"""Operator tools run from a workstation (the `umavez` CLI), never deployed as a Lambda:
replaying provider events through the webhook queue, and redriving the dead-letter queue."""
