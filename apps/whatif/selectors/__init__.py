"""Reads of what-if: trace samples, the replays and lever searches computed from them,
runs and saved scenarios."""
