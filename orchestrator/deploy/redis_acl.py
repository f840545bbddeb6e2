"""Redis ACL users for a Redis shared by several machines: the producers' API, workers, an admin
(docs/operations/several-machines.md).

Producers hold no Redis credentials at all: they go through the producers' API (``python -m orchestrator api``,
with their own keys). The API's user creates and reads jobs, queues their first task, cancels and re-runs jobs and
keeps the keys; a worker runs the phases. So the ``api`` user reaches the job records and what ``jobs`` reads, the
queue and the task results, the keys and the owners' indexes, and nothing else: not the checkpoints workers save
between phases, not the leases, not Redis' configuration. The ``default`` user is switched off, so a client without
a user name and password gets nothing.
"""

from __future__ import annotations

API_KEYS = (
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
    "~orch:apikey*",
    "~orch:owner:*",
)
"""Job records, the job index, histories and spans (read by ``jobs``), the task queue (with its priority lists)
and its bindings; batches, the ledger's identity and the workers' announcements (``jobs``, ``submit --wait``);
earlier runs (``--rerun``) and blobs (inputs, ``--download``); the producers' keys (by hash) and each producer's
jobs (``orch:owner:NAME``)."""


def acl_file(api_password: str, worker_password: str, admin_password: str) -> str:
    """The text of a Redis ACL file (``aclfile``) with the three users; there is no producer user."""
    api = " ".join(API_KEYS)
    return (
        "user default off\n"
        f"user admin on >{admin_password} ~* &* +@all\n"
        f"user worker on >{worker_password} ~* &* +@all -@admin -flushall -flushdb -keys\n"
        f"user api on >{api_password} {api} &* "
        "+@read +@write +@scripting +@connection +@pubsub +@transaction -@dangerous\n"
    )
