"""The ``X-Orch-*`` HTTP headers our model client sends and our scenario servers read: their one home.

- ``X-Orch-Purpose``: why the runtime asks (``plan``, ``act``, ``reflect``, ``semantic``), for tracing and for a
  scenario step's ``purpose`` check.
- ``X-Orch-Job``: the job a request belongs to, so a server shared by many goals keeps their conversations apart.
- ``X-Orch-Cursor``: where a scripted conversation stands — the one way to resume one. A scenario server answers
  every request with the position after it; a client that tracks it (a worker, from the goal's saved state) sends
  it back with its next request, and the server plays from there. A phase run again after a takeover sends the
  position saved before it, so its steps are played again; a goal's next phase on another worker continues.
- ``X-Orch-Cached-Turns``: ``N TOKEN [PURPOSE,…]``, turns the client answered from its response cache since its
  last request, which a scenario server passes over.
"""

PREFIX = "X-Orch-"
"""Every header of ours starts so (a recorder keeps them all)."""
PURPOSE = "X-Orch-Purpose"
JOB = "X-Orch-Job"
CURSOR = "X-Orch-Cursor"
CACHED_TURNS = "X-Orch-Cached-Turns"
