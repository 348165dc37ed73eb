"""The `zync` command: a thin front end over the domain functions."""
