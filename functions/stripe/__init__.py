"""Stripe: its signature check (signature.py), its event table (events.py, the place to start),
its objects (models.py), its API (api.py) and its thin events (thin.py)."""
