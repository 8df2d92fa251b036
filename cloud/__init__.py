"""The edgewave cloud tier: ingest, Spark aggregation, config push."""
