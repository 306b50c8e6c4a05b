"""Models of each provider's objects, the webhooks each sends as they move, and the merchant's
true books: the property tests and the fire drill explore lifecycles with them."""
