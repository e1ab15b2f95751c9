"""Output tags shared by every stage: ``good`` records and ``bad`` dead letters."""

from typing import Any

import apache_beam as beam

GOOD = "good"
BAD = "bad"


def typed(pcoll: beam.PCollection, element_type: Any) -> beam.PCollection:
    """Declare the element type of a (tagged) output so Beam picks its RowCoder."""
    pcoll.element_type = element_type
    return pcoll
