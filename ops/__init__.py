"""The operator's tools: the `umavez` command (cli.py) and the operations it runs on the
deployed stack or the embedded one (preflight, replay, dlq, outcomes, state, send). They depend
on `functions/` and `infra/` settings; the embedded stack, the fire drill and the cost model
are loaded only for the local commands."""
