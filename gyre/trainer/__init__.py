"""Training: the step over packed micro-batches (the driver loop and streaming dispatch build on it)."""
