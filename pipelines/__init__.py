"""Pipelines: options -> transforms -> sinks. No algorithms live here."""

import logging

from transforms.offload import DropImportNoise

# ``import apache_beam`` logs, through the root logger, that optional GCP clients are
# absent (a one-line warning on every ``python -m pipelines.*``): a filter on the root
# logger drops that record and nothing else, before any pipeline module imports Beam.
logging.getLogger().addFilter(DropImportNoise())
