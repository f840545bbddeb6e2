"""Reading the holder's ``build/`` as a tar stream with the response closed on leaving.

docker-py's ``get_archive`` hands back a generator over a response nobody closes: a reader that stops early (at the
disk limit, on an error) would leave the engine still sending. Here the response is closed when the caller leaves,
so what the engine sends after that is never received.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import docker
import docker.utils

from orchestrator.errors import SandboxError, SandboxErrorCode


@contextmanager
def open_archive(
    api: docker.APIClient, container: str, path: str, *, shown: str, where: str
) -> Iterator[tuple[Iterator[bytes], dict[str, Any]]]:
    """The tar body of ``path`` in ``container`` and its path stat; ``shown`` names the path in errors."""
    url = api._url("/containers/{0}/archive", container)
    response = api._get(url, params={"path": path}, stream=True, headers={"Accept-Encoding": "identity"})
    try:
        if response.status_code == 404:
            raise SandboxError(
                f"{shown} does not exist", where=where, retryable=False, code=SandboxErrorCode.NOT_FOUND
            )
        api._raise_for_status(response)
        header = response.headers.get("x-docker-container-path-stat")
        path_stat = docker.utils.decode_json_header(header) if header else {}
        yield response.iter_content(256 * 1024, decode_unicode=False), path_stat
    finally:
        response.close()
