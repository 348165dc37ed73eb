"""Lake tables: current-state (SCD1) and history (SCD2) Delta tables kept from a pool."""
