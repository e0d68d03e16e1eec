"""Evidence tables: schemas, the request-level join, qualification status, the versioned store."""
