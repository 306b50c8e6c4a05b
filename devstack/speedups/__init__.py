"""What makes the embedded stack fast enough to drill 10,000 deliveries: changes to moto
(moto_patches.py) and botocore calls kept on loopback (loopback_calls.py)."""
