"""Builders of test data, one module per kind of thing built.

- ``configuration``: users, teams, pipelines, stages and rules, through the services.
- ``api``: the API tests' world (the ``api`` fixture) and clients.
- ``spans``: hand-made spans (``span``) for analysis and for the wire.
- ``otlp_samples``: three spans that use much of OTLP, and the records they decode to.
- ``ingested_traces``: traces sent through the real ingest path (batch, drain, finalize).
- ``stored_spans``: stored spans read back through the span store, spans stored as an
  older release could have stored them, and a trace whose spans aged out.
- ``demo_traffic``: a pipeline like the demo's and simulator traffic through ingest.
- ``samples_and_rollups``: finalized traces and stage samples written directly, and
  rollups computed the slow way.
- ``bucket_rows``: rollup rows written directly at chosen resolutions.
- ``evaluation_rollups``: rollups, traces and samples with exactly known values for
  budget evaluation.
- ``recompute_traces``: traces analysed under one set of rules, then another.
- ``alerts``: violations, channels and rules with known times.
- ``deliveries``: payloads and notifications for the transports and formats.
"""
