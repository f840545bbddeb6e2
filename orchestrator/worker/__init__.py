"""Distributed mode: Celery tasks over the workflow's phases, the job ledger in Redis, the producer's side."""
