"""The embedded local stack: the whole pipeline on moto, a fire drill, and an inspection CLI."""
