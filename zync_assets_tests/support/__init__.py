"""Helpers shared by the test modules: scheduling across xdist workers, and (gradually)
the spec writers, command runners and kill loops the tests have in common."""
