"""Asaas: its event table and interpreter (events.py, the place to start), what each event
books (entries.py), its event and payment (models.py), its signature check (signature.py,
ingest's) and its API client (api.py)."""
