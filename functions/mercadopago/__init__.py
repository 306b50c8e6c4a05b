"""Mercado Pago: its signature check (signature.py), its map (events.py, the place to start),
the entries of a payment (entries.py), its objects (models.py), its Orders API's orders
(orders.py) and its API (api.py)."""
