"""Pipelines: options -> transforms -> sinks. No algorithms live here."""
