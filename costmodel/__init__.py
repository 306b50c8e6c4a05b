"""The measuring tools: the cost per million events, measured on the embedded stack
(scenarios.py) and priced with AWS's published prices (model.py); the capacity from the same
measurement against AWS's quotas and the stack's settings (headroom.py, headroom_report.py)."""
