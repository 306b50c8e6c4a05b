"""The providers' own books read back: each movement they recorded booked once, and matched."""
