"""Example processors for s3ingest's effect hook (CONTRACT C11): copy one and make it yours."""
