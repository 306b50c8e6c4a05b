"""Provider adapters: turn a provider's raw payload into what it means for our orders."""
