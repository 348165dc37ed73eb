"""Over the stages: the continuous pipeline, where every pool stands (status, failures), SQL over pools and tables, their upkeep."""
