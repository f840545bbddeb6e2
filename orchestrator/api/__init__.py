"""The producers' front door: an authenticated HTTP API over the job ledger (``python -m orchestrator api``)."""
