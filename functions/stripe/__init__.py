"""Stripe: its event table and interpreter (events.py, the place to start), what each kind of
movement books (payments.py, refunds.py, disputes.py), its objects and API versions (models.py,
read by reading.py), its thin events (thin.py), its balance's lines (balance.py), its signature
check (signature.py, ingest's) and its API client (api.py)."""
