"""The fire drill: deliver like the providers do, then prove every guarantee from the tables.

stories.py   what is delivered per order, and what the order must look like afterwards
delivery.py  the simulated providers: signing, copies at once, retries on a timeout or 5xx
progress.py  the console's progress (a bar on a terminal, plain lines anywhere else)
checks.py    the guarantees of docs/design.md, judged from the tables
report.py    the facts of a run and one line per check
run.py       a whole run, against the embedded stack (`devstack`) or a deployed one

It is a package of its own, not part of `devstack`, because it also drills a deployed stack
through its URL and tables; the embedded AWS never imports it.
"""
