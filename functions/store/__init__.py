"""The ledger store's DynamoDB adapter: every item written under a condition, every condition,
every query's key condition, and the reading of a refused transaction live here, so that the
rules they hold (a key reserved once, an order moved only by a later event, a binding held by
its first order) are written in one place. The functions above decide; this package says how
DynamoDB is asked.
"""
