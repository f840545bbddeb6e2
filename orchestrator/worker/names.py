"""Names the CLI shows without loading Celery or the ledger (``jobs --help`` lists the states): the queues by name
and the job states people see."""

QUEUE = "orchestrator"
"""The queue the phases are sent to; a worker consumes it only while ready."""
STANDBY_QUEUE = "orchestrator.standby"
"""The queue a worker starts on: nothing is ever sent there, so it takes no work until ready."""
SHOWN_STATES = (
    "queued", "planning", "acting", "reflecting", "stalled", "done", "unmet", "failed", "cancelled"
)
"""The states ``jobs`` shows: the ledger's, and ``stalled`` (a running phase whose worker stopped heart-beating)."""
