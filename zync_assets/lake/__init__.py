"""The lake: pools and lake tables as Delta tables, their files (a folder or S3), commits, ingest's progress record, leases."""
