"""The embedded local stack: the whole pipeline on moto, the cost model and the `umavez` CLI
(the fire drill that runs against it is the `firedrill` package)."""
