"""Asaas: its signature check (signature.py), its map (events.py, the place to start), what
each event books (entries.py), its objects (models.py) and its API (api.py)."""
