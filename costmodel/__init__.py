"""The cost per million events, measured: scenarios run on the embedded stack (scenarios.py)
and priced line by line with AWS's published prices (model.py)."""
