"""Changes to moto's SQS for the local stack's server (moto_patches.py)."""
