"""The sandbox runner on the Docker SDK.

A *job* owns two volumes and a holder container: ``build/`` (a size-limited tmpfs, the only writable place) and a
read-only view of the skill (an overlay of an empty ``build/`` over the skill root, or a per-job copy), kept
mounted by a tiny holder that also serves put/get_archive. A *call* runs in a fresh container that is removed
afterwards. To take the engine's start-up cost off the call, the job keeps its next container created, attached
and started ahead of time, waiting on stdin for the interpreter, the script and the args (see ``LAUNCHER``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import docker
import docker.errors

from orchestrator.config import SandboxSettings
from orchestrator.errors import SandboxError, SandboxErrorCode
from orchestrator.logs import get_logger
from orchestrator.sandbox.browser import BROWSER_OPERATION, browser_image_id
from orchestrator.sandbox.docker_job import SandboxJob
from orchestrator.sandbox.egress import EgressPlan
from orchestrator.sandbox.engine import BUILD_IMAGE_HINT, connect, default_work_dir, docker_errors, private_dir
from orchestrator.sandbox.image import image_tools
from orchestrator.sandbox.profiles import apply_operations
from orchestrator.sandbox.reaper import FOREIGN_GRACE_S, owner_id, reap_orphans

log = get_logger(__name__)

REAP_INTERVAL_S = 300.0
SkillView = Literal["auto", "overlay", "copy"]
Prewarm = Literal["started", "created", "off"]


class SandboxRunner:
    """Runs skill scripts in throwaway containers. One per process; thread-safe across jobs."""

    def __init__(
        self,
        settings: SandboxSettings,
        client: docker.DockerClient | None = None,
        *,
        work_dir: Path | None = None,
        skill_view: SkillView = "auto",
        prewarm: Prewarm = "started",
        reap_on_start: bool = True,
    ) -> None:
        self.settings = settings
        self.owner = owner_id()
        self.work_dir = private_dir(work_dir or default_work_dir())
        self.skill_view: SkillView = skill_view
        self.prewarm: Prewarm = prewarm
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="sandbox")
        self._image_id: str | None = None
        self._last_reap = 0.0
        self._client = client
        self._reap_on_start = reap_on_start
        self._connect_lock = threading.RLock()  # reaping on connect reads self.client again
        if client is not None:
            self._connected()

    # -- the engine, connected on first use (a goal whose skills run no script needs no Docker engine) ----------

    @property
    def client(self) -> docker.DockerClient:
        with self._connect_lock:
            if self._client is None:
                self._client = connect()
                self._connected()
            return self._client

    @property
    def api(self) -> docker.APIClient:
        return self.client.api

    def _connected(self) -> None:
        if self._reap_on_start:
            self._reap_on_start = False
            self._reap_quietly()

    def image_tools(self) -> dict[str, str]:
        """The tools calls can use (see :func:`orchestrator.sandbox.image.image_tools`): the sandbox image's, and the
        browser image's when it is built (a superset: calls that start a browser, or declare one, run there)."""
        tools = image_tools(self.client, self.settings.image)
        try:
            return {**tools, **image_tools(self.client, self.settings.browser_image)}
        except SandboxError as e:
            if e.code not in (SandboxErrorCode.IMAGE_MISSING, SandboxErrorCode.NO_TOOL_LIST):
                raise
            return tools

    # -- jobs -------------------------------------------------------------------------------------------------

    def open_job(
        self,
        job_id: str,
        skill_root: Path,
        *,
        disk_mb: int = 50,
        inputs_dir: Path | None = None,
        operations: Sequence[str] = (),
        goal: str = "",
        egress: EgressPlan | None = None,
    ) -> SandboxJob:
        """Set up a job's volumes and holder; the caller must ``close()`` it (or use it as a context manager).

        ``operations`` (a skill's ``metadata.operations``) select heavier limits from ``sandbox.profiles``;
        ``egress`` (a granted declaration, see ``egress.py``) gives the calls the job's egress proxy as their only
        route out.
        """
        root = Path(skill_root)
        if not root.is_dir():
            raise SandboxError(
                f"skill root {root} is not a folder",
                where="sandbox:setup",
                retryable=False,
                code=SandboxErrorCode.BAD_SKILL_ROOT,
            )
        if inputs_dir is not None and not Path(inputs_dir).is_dir():
            raise SandboxError(
                f"inputs folder {inputs_dir} is not a folder",
                where="sandbox:setup",
                retryable=False,
                code=SandboxErrorCode.BAD_INPUTS,
            )
        browser = BROWSER_OPERATION in operations
        # a skill declaring the browser runs every call in the browser image (see sandbox/browser.py)
        image = browser_image_id(self.client, self.settings.browser_image) if browser else self.image_id()
        if time.monotonic() - self._last_reap > REAP_INTERVAL_S:
            self._last_reap = time.monotonic()
            self.executor.submit(self._reap_quietly)
        job = SandboxJob(
            self,
            job_id,
            root.resolve(),
            goal=goal or job_id,
            disk_mb=disk_mb,
            inputs_dir=inputs_dir,
            # pinned to the id just read: stored results name the image their scripts really ran in
            settings=apply_operations(self.settings, operations).model_copy(update={"image": image}),
            egress=egress,
            browser=browser,
        )
        try:
            job._setup()
        except BaseException:
            job.close()
            raise
        return job

    def image_id(self) -> str:
        """The id the image's tag names now (read again on every call: a rebuilt image is a new one)."""
        with docker_errors("sandbox:image"):
            try:
                image_id: str = self.api.inspect_image(self.settings.image)["Id"]
            except docker.errors.ImageNotFound as e:
                raise SandboxError(
                    f"sandbox image {self.settings.image} is missing",
                    where="sandbox:image",
                    next_step=f"build it: {BUILD_IMAGE_HINT}",
                    retryable=False,
                    code=SandboxErrorCode.IMAGE_MISSING,
                ) from e
        self._image_id = image_id
        return image_id

    # -- orphans ----------------------------------------------------------------------------------------------

    def reap(self, *, older_than_s: float = 0, foreign_after_s: float = FOREIGN_GRACE_S) -> int:
        """Remove labelled orphans of our prefix (containers and volumes of dead owners); returns how many."""
        with docker_errors("sandbox:reap"):
            report = reap_orphans(
                self.client,
                self.settings.label_prefix,
                older_than_s=older_than_s,
                foreign_after_s=foreign_after_s,
                work_root=self.work_dir / "jobs",
            )
        return report.removed

    def _reap_quietly(self) -> None:
        try:
            self.reap()
        except Exception as e:  # noqa: BLE001 - reaping is housekeeping; a failure must not stop the jobs
            log.warning("sandbox.reap_failed", error=str(e))

    def close(self) -> None:
        self.executor.shutdown(wait=True)
