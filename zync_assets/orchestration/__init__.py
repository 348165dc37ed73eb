"""Dagster front end: assets, sensors and resources over the domain functions."""
