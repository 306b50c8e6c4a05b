"""The operator's tools for the deployed stack (and the embedded one): they read and repair
production, so they depend on `functions/` and `infra/` settings, never on the local stack."""
