"""The error every ingest helper raises for a record that cannot become a document."""


class IngestError(ValueError):
    """A record that cannot become a document; ``error_type`` names why."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
