"""Which instances a per-instance query reports (docs/engine.md, "Per-instance queries").

``non-empty`` (the default; C-SPARQL's and SPARQLStream's behaviour in CSRBench): an
instance is reported when some window of the query holds a triple. ``window-close``: every
instance from the first triple on. ``on-change``: when the result differs from the last
one reported.
"""
REPORT_POLICIES = ("non-empty", "window-close", "on-change")
