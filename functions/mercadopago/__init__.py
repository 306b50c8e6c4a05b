"""Mercado Pago: its map (events.py, the place to start), the entries of a payment
(entries.py), its notification and payment (models.py), its Orders API's orders (orders.py),
its signature check (signature.py, ingest's) and its API client (api.py)."""
