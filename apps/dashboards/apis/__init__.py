"""REST API of the trace explorer, beside its pages; read-only, for API tokens and sessions."""
