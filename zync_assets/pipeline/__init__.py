"""The continuous pipeline over the stages, and where every pool stands (status, failures)."""
