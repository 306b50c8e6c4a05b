"""Real-shaped provider events, built from the captured shapes in tests/events: the tests and
the fire drill deliver the same payloads (`provider_events.stripe` builds Stripe's)."""
