"""Evidence tables: schemas, the request-level join, qualification status, the versioned store."""
from qualflow.evidence.schema import SCHEMA_VERSION, STATUS_LADDER, TABLES  # noqa: F401
