"""Redis ACL users for a Redis shared by several machines: producers vs workers (docs/operations/several-machines.md).

A producer creates and reads jobs, queues their first task, cancels and re-runs its jobs; a worker runs the phases.
So the producer user reaches the job records and what ``jobs`` reads, the queue and the task results, and nothing
else: not the checkpoints workers save between phases, not the leases, not Redis' configuration. The ``default``
user is switched off, so a client without a user name and password gets nothing.
"""

from __future__ import annotations

PRODUCER_KEYS = (
    "~orch:job:*",
    "~orch:jobs",
    "~orch:history:*",
    "~orch:spans:*",
    "~orch:batch:*",
    "~orch:stack",
    "~orch:worker:*",
    "~orch:run:*",
    "~orch:blob:*",
    "~orchestrator*",
    "~_kombu.binding*",
    "~celery-task-meta-*",
)
"""Job records, the job index, histories and spans (read by ``jobs``), the task queue (with its priority lists)
and its bindings; batches, the ledger's identity and the workers' announcements (``jobs``, ``submit --wait``);
earlier runs (``--rerun``) and blobs (inputs, ``--download``)."""


def acl_file(producer_password: str, worker_password: str, admin_password: str) -> str:
    """The text of a Redis ACL file (``aclfile``) with the three users."""
    producer = " ".join(PRODUCER_KEYS)
    return (
        "user default off\n"
        f"user admin on >{admin_password} ~* &* +@all\n"
        f"user worker on >{worker_password} ~* &* +@all -@admin -flushall -flushdb -keys\n"
        f"user producer on >{producer_password} {producer} &* "
        "+@read +@write +@scripting +@connection +@pubsub +@transaction -@dangerous\n"
    )
