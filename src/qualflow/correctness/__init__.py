"""Family correctness: the native Task on a bundle against the family's reference (transformers)."""
