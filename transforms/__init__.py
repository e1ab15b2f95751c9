"""Build stages, one composite PTransform per module."""
