"""Changes to moto for the local stack's server (moto_patches.py)."""
