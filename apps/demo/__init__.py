"""The live demo of ``make run``: its team and pipeline, and traffic like an AI app's.

Ingest knows nothing of it: the traffic goes through the public endpoint with an ingest
token, as any application's would.
"""
