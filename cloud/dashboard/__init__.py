"""The operator dashboard: `edgewave-cloud dashboard` (and the third child of `edgewave-cloud run`).

Server-rendered pages over the cloud's SQLite database, opened read-only:
``app`` (routes), ``auth`` (users, roles, sessions, CSRF, login limits),
``queries`` (the read-only SQL), ``bucketing`` (chart ranges and buckets),
``live`` (server-sent events from ingest's live feed), ``export`` (CSV),
``viewfmt`` (times in the viewer's zone), ``server`` (uvicorn and the session key),
``rendering`` (templates). Alarms: ``follower`` (the one reader of the live feed),
``alarms`` (their lifecycle, in the dashboard's own SQLite file), ``alarm_pages``
(routes), ``evidence`` (what made a match). Configuration: ``configs`` (pushed
documents, statuses, diffs), ``highlight`` (patterns as coloured text),
``config_pages`` (routes; pushes go through cloud/publisher.py).
Templates and static files (vendored htmx and uPlot) ship as package data.
See docs/cloud.md, "Dashboard".
"""
