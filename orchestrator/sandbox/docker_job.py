"""One sandbox job on the Docker SDK: its volumes and holder, one fresh container per call (``build/`` file access
is in ``buildfolder.py``).

See ``docker.py`` for the runner that opens jobs and for the design.
"""

from __future__ import annotations

import io
import json
import os
import re
import secrets
import select
import shutil
import socket
import tarfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import docker
import docker.errors
import docker.utils
import requests
from docker.types import Mount

from orchestrator.config import SandboxSettings
from orchestrator.errors import SandboxError, SandboxErrorCode, SandboxRefused
from orchestrator.logs import get_logger
from orchestrator.sandbox.browser import browser_call_settings
from orchestrator.sandbox.buildfolder import HOLDER_BUILD, BuildFolder
from orchestrator.sandbox.commands import resolve_command
from orchestrator.sandbox.egress import EgressPlan
from orchestrator.sandbox.egress_proxy import CA_MOUNT, HOLDER_CA, SYSTEM_BUNDLE, EgressProxy, ca_archive, scrub_result
from orchestrator.sandbox.engine import docker_errors, private_dir
from orchestrator.sandbox.limits import (
    BROWSER_REPORT_GRACE_S,
    BUILD_DIR,
    INPUTS_MOUNT,
    SKILL_MOUNT,
    build_volume_options,
    check_timeout,
    holder_host_config,
    launcher,
    overlay_volume_options,
    resolve_script,
    sandbox_environment,
    script_host_config,
)
from orchestrator.sandbox.models import BuildFile, ScriptResult
from orchestrator.sandbox.profiles import call_timeout
from orchestrator.sandbox.reaper import labels
from orchestrator.sandbox.results import LaunchedCommand, script_result
from orchestrator.sandbox.streams import OutputCollector, pump

if TYPE_CHECKING:
    from orchestrator.sandbox.docker import SandboxRunner

log = get_logger(__name__)



@dataclass
class _Prepared:
    id: str
    name: str
    sock: Any  # the attach socket (socket.SocketIO over the engine's connection)
    started: bool
    raw: socket.socket = field(init=False)

    def __post_init__(self) -> None:
        self.raw = self.sock._sock

    def dead(self) -> bool:
        """True if the engine already closed the stream (the container exited before its call)."""
        if not self.started:
            return False
        readable, _, _ = select.select([self.raw], [], [], 0)
        if not readable:
            return False
        try:
            return self.raw.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def close(self) -> None:
        # shutdown, not just close: the HTTP response still holds the descriptor, and the engine must see the
        # connection end (a kill waits on its copy into this socket while we no longer read).
        with suppress(OSError):
            self.raw.shutdown(socket.SHUT_RDWR)
        with suppress(OSError):
            self.raw.close()
        with suppress(OSError):
            self.sock.close()


def _slug(job_id: str) -> str:
    return (re.sub(r"[^A-Za-z0-9_.-]+", "-", job_id).strip("-.") or "job")[:40]


class SandboxJob:
    """One job's sandbox: ``build/`` that persists across calls, and a fresh container per ``run_script``."""

    def __init__(
        self,
        runner: SandboxRunner,
        job_id: str,
        skill_root: Path,
        *,
        goal: str = "",
        disk_mb: int,
        inputs_dir: Path | None,
        settings: SandboxSettings | None = None,
        egress: EgressPlan | None = None,
        browser: bool = False,
    ) -> None:
        self.runner = runner
        self.settings = settings or runner.settings  # the runner's, raised by the skill's declared operations
        self.browser = browser
        """The whole job runs in the browser image (its skill declares ``browser-automation``)."""
        self.job_id = job_id
        self.goal = goal or job_id
        """The goal (worker job) this sandbox job works for: its clean-up matches this label exactly."""
        self.skill_root = skill_root
        self.disk_mb = disk_mb
        self.inputs_dir = Path(inputs_dir).resolve() if inputs_dir is not None else None
        self.name = f"{self.settings.label_prefix}-{_slug(job_id)}-{secrets.token_hex(4)}"
        self.job_dir = runner.work_dir / "jobs" / self.name
        self.skill_view: Literal["overlay", "copy"] = "overlay"
        self.setup_ms = 0.0
        self.holder: str | None = None
        self._api = runner.api
        self._containers: set[str] = set()
        self._volumes: list[str] = []
        self._removals: list[Future[None]] = []
        self._pending: Future[_Prepared] | None = None
        self._script_host_config: dict[str, Any] = {}
        self._mounts: list[Mount] = []
        self._seq = 0
        self._seq_lock = threading.Lock()
        self._call_lock = threading.Lock()
        self._closed = False
        self._build_folder: BuildFolder | None = None
        self._environment = sandbox_environment()
        self._network = "none"
        self.egress: EgressProxy | None = None
        if egress is not None:
            self.egress = EgressProxy(self._api, egress, name=self.name, labels=self._labels)

    def __enter__(self) -> SandboxJob:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _labels(self, role: str, call: int | None = None) -> dict[str, str]:
        return labels(
            self.settings.label_prefix,
            owner=self.runner.owner,
            job=self.job_id,
            goal=self.goal,
            role=role,
            call=call,
            jobdir=str(self.job_dir),
        )

    # -- setup ------------------------------------------------------------------------------------------------

    def _setup(self) -> None:
        started = time.perf_counter()
        with docker_errors(f"sandbox:setup:{self.name}"):
            if self.egress is not None:
                self.egress.start()  # first: the proxy starts while the job's volumes and holder are made
            build = self._create_volume(f"{self.name}-build", build_volume_options(self.disk_mb, self.settings.uid))
            skill_mount = self._skill_mount()
            build_mount = Mount(HOLDER_BUILD, build, type="volume", no_copy=True)
            more = []
            if self.egress is not None:  # the proxy's CA for the calls: written through the holder, no host path
                ca = self._create_volume(f"{self.name}-egress-ca", build_volume_options(1, self.settings.uid))
                more.append(Mount(HOLDER_CA, ca, type="volume", no_copy=True))
            try:
                self._start_holder([skill_mount, build_mount, *more])
            except docker.errors.APIError as e:
                if self.runner.skill_view != "auto" or self.skill_view != "overlay":
                    raise
                log.info("sandbox.overlay_unavailable", job=self.name, error=str(e))
                self._discard_holder()
                skill_mount = self._copy_skill()
                self._start_holder([skill_mount, build_mount, *more])
            assert self.holder is not None
            self._build_folder = BuildFolder(
                self._api, self.holder, name=self.name, disk_mb=self.disk_mb, settings=self.settings
            )
            mounts = [skill_mount, Mount(f"{SKILL_MOUNT}/{BUILD_DIR}", build, type="volume", no_copy=True)]
            if self.inputs_dir is not None:
                mounts.append(Mount(INPUTS_MOUNT, str(self.inputs_dir), type="bind", read_only=True))
            if self.egress is not None:
                self._open_egress(self.egress)
                mounts.append(Mount(CA_MOUNT, more[0]["Source"], type="volume", read_only=True, no_copy=True))
            self._mounts = mounts
            self._script_host_config = self._api.create_host_config(
                **script_host_config(self.settings, mounts, network=self._network)
            )
        self.setup_ms = (time.perf_counter() - started) * 1000
        log.info("sandbox.job_open", job=self.name, skill_view=self.skill_view, setup_ms=round(self.setup_ms, 1))
        if self.runner.prewarm != "off":
            self._pending = self.runner.executor.submit(self._prepare)

    def _open_egress(self, proxy: EgressProxy) -> None:
        """Wait for the job's egress proxy and put its CA where the calls read it (the calls then join its
        internal network and trust that CA)."""
        files = proxy.wait_ready(system_bundle=self._image_file(SYSTEM_BUNDLE))
        assert self.holder is not None
        self._api.put_archive(self.holder, HOLDER_CA, ca_archive(files))
        self._network = proxy.network
        self._environment = {**sandbox_environment(), **proxy.call_environment()}

    def _image_file(self, path: str) -> bytes:
        """A file of the sandbox image (read through the holder), or b"" if it has none."""
        assert self.holder is not None
        try:
            stream, _stat = self._api.get_archive(self.holder, path)
            data = b"".join(stream)
        except docker.errors.NotFound:
            return b""
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            member = next((m for m in tar.getmembers() if m.isfile() and m.size <= 8 * 1024 * 1024), None)
            extracted = tar.extractfile(member) if member is not None else None
            return extracted.read() if extracted is not None else b""

    def _create_volume(self, name: str, options: dict[str, str]) -> str:
        self._api.create_volume(name=name, driver="local", driver_opts=options, labels=self._labels("volume"))
        self._volumes.append(name)
        return name

    def _skill_mount(self) -> Mount:
        options = None
        if self.runner.skill_view in ("auto", "overlay"):
            stub = self.runner.work_dir / "overlay-stub"
            (stub / BUILD_DIR).mkdir(parents=True, exist_ok=True)
            stub.chmod(0o755)  # the merged root takes the top layer's mode: the sandbox user must enter it
            options = overlay_volume_options(stub, self.skill_root)
        if options is None:
            if self.runner.skill_view == "overlay":
                raise SandboxError(
                    f"skill root {self.skill_root} cannot be an overlay lower layer (',', ':' or '=' in its path)",
                    where="sandbox:setup",
                    retryable=False,
                )
            return self._copy_skill()
        self.skill_view = "overlay"
        volume = self._create_volume(f"{self.name}-skill", options)
        return Mount(SKILL_MOUNT, volume, type="volume", read_only=True, no_copy=True)

    def _copy_skill(self) -> Mount:
        """Fallback view: a per-job copy of the skill (symlinks copied as links, never followed)."""
        self.skill_view = "copy"
        private_dir(self.job_dir.parent)
        target = self.job_dir / "skill"
        shutil.copytree(
            self.skill_root,
            target,
            symlinks=True,
            ignore=lambda folder, names: [BUILD_DIR] if Path(folder) == self.skill_root and BUILD_DIR in names else [],
        )
        (target / BUILD_DIR).mkdir(exist_ok=True)
        for folder, _dirs, files in os.walk(target):
            os.chmod(folder, 0o755)  # the sandbox user reads the copy whatever the original modes were
            for name in files:
                path = Path(folder, name)
                if not path.is_symlink():
                    path.chmod(path.stat().st_mode | 0o444)
        return Mount(SKILL_MOUNT, str(target), type="bind", read_only=True)

    def _start_holder(self, mounts: list[Mount]) -> None:
        uid = self.settings.uid
        created = self._api.create_container(
            self.settings.image,
            ["sleep", "infinity"],
            name=f"{self.name}-holder",
            user=f"{uid}:{uid}",
            environment=sandbox_environment(),
            labels=self._labels("holder"),
            host_config=self._api.create_host_config(**holder_host_config(mounts)),
            use_config_proxy=False,
        )
        self.holder = created["Id"]
        self._containers.add(created["Id"])
        self._api.start(created["Id"])

    def _discard_holder(self) -> None:
        if self.holder:
            self._remove_container(self.holder)
            self.holder = None
        for name in [v for v in self._volumes if v.endswith("-skill")]:
            self._remove_volume(name)

    # -- calls ------------------------------------------------------------------------------------------------

    def _prepare(self, browser: SandboxSettings | None = None) -> _Prepared:
        """Create the next call's container, attach to it, and (with prewarm "started") start it; with ``browser``
        (a browser call of an ordinary job), one in the browser image with that profile's limits, started later."""
        with self._seq_lock:
            self._seq += 1
            call = self._seq
        uid = self.settings.uid
        name = f"{self.name}-c{call}"
        with docker_errors(f"container:{name}"):
            host_config = self._script_host_config
            if browser is not None:
                host_config = self._api.create_host_config(
                    **script_host_config(browser, self._mounts, network=self._network)
                )
            created = self._api.create_container(
                browser.image if browser is not None else self.settings.image,
                launcher(browser=browser is not None or self.browser),
                name=name,
                user=f"{uid}:{uid}",
                working_dir=SKILL_MOUNT,
                environment=self._environment,
                labels=self._labels("script", call),
                host_config=host_config,
                stdin_open=True,  # with detach=False this also sets StdinOnce: our half-close ends stdin
                use_config_proxy=False,  # never inject the client's proxy settings into the environment
                # No network_disabled: without egress the host config's network_mode "none" keeps the network
                # off (loopback only); with network_disabled Docker writes an empty /etc/hosts and `localhost`
                # does not resolve.
                hostname="sandbox",
            )
            cid = created["Id"]
            self._containers.add(cid)
            sock = self._api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            prestart = self.runner.prewarm == "started" and browser is None
            if prestart:
                self._api.start(cid)
        return _Prepared(cid, name, sock, started=prestart)

    def _take_prepared(self) -> _Prepared:
        pending, self._pending = self._pending, None
        if pending is not None:
            try:
                prepared = pending.result(timeout=120)
                if not prepared.dead():
                    return prepared
                self._discard(prepared)
            except Exception as e:  # noqa: BLE001 - a failed pre-creation is retried once, synchronously
                log.warning("sandbox.prewarm_failed", job=self.name, error=str(e))
        return self._prepare()

    def wait_ready(self, timeout_s: float = 120) -> None:
        """Block until the next call's container is prepared (benchmarks use it to keep measurements apart)."""
        if self._pending is not None:
            with suppress(Exception):
                self._pending.result(timeout=timeout_s)

    def run_script(
        self,
        script: str,
        args: dict[str, Any] | list[Any] | None = None,
        *,
        argv: Sequence[str] = (),
        timeout_s: float = 20,
    ) -> ScriptResult:
        """Run ``script`` with ``args`` as its stdin JSON and ``argv`` as its command line, in a fresh container.

        ``script`` is relative to the skill root: a file of the skill, or code the model wrote under ``build/``
        (same container, same rules). ``timeout_s`` is capped at ``sandbox.timeout_cap_s``. Raises
        :class:`SandboxRefused` before any container starts when the policy refuses the script, and
        :class:`SandboxError` when the engine fails. A failing, slow, noisy or OOM-killed script is a result.
        """
        self._check_open()
        command = resolve_script(self.skill_root, script, self.settings.allowed_extensions, argv)
        if command.in_build:
            self._build().check_script(command.script, command.target)
        try:
            payload = json.dumps({} if args is None else args, ensure_ascii=False, allow_nan=False).encode()
        except ValueError as e:  # also UnicodeEncodeError (lone surrogates) and NaN/Infinity
            raise SandboxRefused(
                f"cannot run {script}: its args are not plain JSON ({e})",
                where=f"tool:run_script:{script}",
                next_step="pass args that are plain JSON",
                retryable=False,
                violation="bad_call",
                script=script,
            ) from e
        return self._call(command, payload, timeout_s)

    def run_command(self, argv: Sequence[str], *, timeout_s: float = 20) -> ScriptResult:
        """Run one allowed program (``argv[0]``, see ``sandbox/commands.py``) with the skill root as working folder.

        Same container, limits and result as :meth:`run_script`; stdin is empty and plain-text stdout is fine.
        Refused before any container starts when the program is not in ``sandbox.allowed_commands``.
        """
        self._check_open()
        command = resolve_command(argv, self.settings.allowed_commands)
        return self._call(command, b"", timeout_s)

    def _call(self, command: LaunchedCommand, payload: bytes, timeout_s: float) -> ScriptResult:
        try:
            check_timeout(timeout_s)
        except ValueError as e:
            raise SandboxRefused(
                str(e), where=f"tool:run_script:{command.label}", next_step="pass timeout_s as a number of seconds",
                retryable=False, violation="bad_call", script=command.label,
            ) from e
        browser = self._browser_settings(command)
        settings = browser or self.settings
        timeout_s = call_timeout(settings, timeout_s, timeout_s)
        with self._call_lock:
            prepared = self._prepare(browser) if browser is not None else self._take_prepared()
            try:
                result = self._run(prepared, command, payload, timeout_s, settings)
            finally:
                if self._build_folder is not None:
                    self._build_folder.dirty = True  # also when the call failed: the script may have written
                self._discard(prepared)
                if not self._closed and self.runner.prewarm != "off":
                    self._pending = self.runner.executor.submit(self._prepare)
            if self.egress is not None:  # under the lock: the proxy's lines since the last call are this call's
                result = result.model_copy(update={"egress": self.egress.take_records()})
                result = scrub_result(result, self.egress.plan.injections)
        log.info(
            "sandbox.call",
            job=self.name,
            container=result.container,
            cmd=result.command,
            exit_code=result.exit_code,
            ok=result.ok,
            stdout_bytes=result.stdout_bytes,
            stderr_bytes=result.stderr_bytes,
            duration_ms=result.duration_ms,
            timed_out=result.timed_out,
            oom_killed=result.oom_killed,
            reason=result.reason,
        )
        return result

    def _browser_settings(self, command: LaunchedCommand) -> SandboxSettings | None:
        """For a call of an ordinary job that starts a browser: the browser image and profile; else None."""
        if self.browser:
            return None
        return browser_call_settings(self.runner.client, self.settings, self.skill_root, command.argv, self._build())

    def _run(
        self, prepared: _Prepared, command: LaunchedCommand, payload: bytes, timeout_s: float, settings: SandboxSettings
    ) -> ScriptResult:
        collector = OutputCollector(settings.stdout_limit_bytes, settings.stderr_max_lines)
        browser = self.browser or settings is not self.settings
        where = f"container:{prepared.name}"
        with docker_errors(where):
            if not prepared.started:
                self._api.start(prepared.id)
            started = time.monotonic()
            deadline = started + timeout_s + (BROWSER_REPORT_GRACE_S if browser else 0)
            prepared.raw.settimeout(timeout_s)  # a script that never reads a large stdin must not block us
            try:
                prepared.raw.sendall(command.launcher_header(timeout_s) + payload)
                prepared.raw.shutdown(socket.SHUT_WR)  # EOF on the script's stdin
                fed = True
            except TimeoutError:
                fed = False
            except OSError as e:
                raise SandboxError(f"could not feed stdin to {prepared.name}: {e}", where=where, retryable=True) from e
            outcome = pump(prepared.raw, collector, deadline) if fed else "timeout"
            exit_code: int | None = None
            if outcome == "eof":  # output closed; a script that closed it early may still be running
                try:
                    exit_code = self._wait(prepared.id, max(deadline - time.monotonic(), 0.2))
                except requests.exceptions.Timeout:
                    outcome = "timeout"
            duration_ms = int((time.monotonic() - started) * 1000)
            if outcome != "eof":
                prepared.close()  # first: the engine's kill waits for its copy into this socket to end
                with suppress(docker.errors.APIError):
                    self._api.kill(prepared.id)
                exit_code = self._wait(prepared.id, 60)
            oom = False
            # a browser's renderer can die of the memory limit while the script goes on: look after every call
            if outcome == "eof" and (exit_code not in (0, None) or browser):
                state = self._api.inspect_container(prepared.id)["State"]
                oom = bool(state.get("OOMKilled"))
        return script_result(
            settings,
            self.disk_mb,
            command,
            prepared.name,
            collector,
            outcome,
            exit_code,
            oom,
            duration_ms,
            timeout_s,
        )

    def _wait(self, cid: str, timeout_s: float) -> int | None:
        status = self._api.wait(cid, timeout=timeout_s).get("StatusCode")
        return int(status) if status is not None else None

    def _discard(self, prepared: _Prepared) -> None:
        prepared.close()
        try:
            self._removals.append(self.runner.executor.submit(self._remove_container, prepared.id))
        except RuntimeError:  # the runner's executor is shut down: remove in this thread
            self._remove_container(prepared.id)

    def _remove_container(self, cid: str) -> None:
        try:
            self._api.remove_container(cid, force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            if e.status_code != 409:  # 409: removal already in progress
                log.warning("sandbox.remove_failed", container=cid[:12], error=str(e))
                return
        self._containers.discard(cid)

    def _remove_volume(self, name: str) -> None:
        for attempt in range(20):
            try:
                self._api.remove_volume(name)
                break
            except docker.errors.NotFound:
                break
            except docker.errors.APIError as e:
                if e.status_code != 409 or attempt == 19:
                    log.warning("sandbox.volume_remove_failed", volume=name, error=str(e))
                    return
                time.sleep(0.05)
        if name in self._volumes:
            self._volumes.remove(name)

    # -- build/ -----------------------------------------------------------------------------------------------

    def _build(self) -> BuildFolder:
        self._check_open()
        assert self._build_folder is not None
        return self._build_folder

    def take_pruned(self) -> list[str]:
        """Violations found since the last call (files removed from ``build/``), handed out once."""
        return self._build_folder.take_pruned() if self._build_folder is not None else []

    def free_bytes(self) -> int:
        """Bytes still free in ``build/`` (the tmpfs as the kernel counts it)."""
        return self._build().free_bytes()

    def write_file(self, rel_path: str, data: bytes) -> BuildFile:
        """Write ``data`` to ``build/rel_path``; a write that does not fit raises ``disk_full`` and leaves nothing."""
        return self._build().write_file(rel_path, data)

    def read_file(self, rel_path: str, *, max_bytes: int = 10 * 1024 * 1024) -> bytes:
        """The content of the regular file ``build/rel_path`` (symlinks and folders refused)."""
        return self._build().read_file(rel_path, max_bytes=max_bytes)

    def list_files(self) -> list[BuildFile]:
        """Every regular file in ``build/`` with its size and sha256."""
        return self._build().list_files()

    def export(self, dest: Path) -> list[BuildFile]:
        """Copy ``build/`` into the host folder ``dest`` (regular files only, nothing followed through symlinks)."""
        return self._build().export(dest)

    def _check_open(self) -> None:
        if self._closed or self.holder is None:
            closed = SandboxErrorCode.JOB_CLOSED
            raise SandboxError("the sandbox job is closed", where=f"sandbox:{self.name}", retryable=False, code=closed)

    # -- teardown ---------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Remove every container and volume of the job and its folder; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        pending, self._pending = self._pending, None
        if pending is not None:
            with suppress(Exception):
                self._discard(pending.result(timeout=120))
        for removal in list(self._removals):
            with suppress(Exception):
                removal.result(timeout=120)
        for cid in list(self._containers):
            self._remove_container(cid)
        if self.egress is not None:
            self.egress.close(self._remove_container)
        for name in list(self._volumes):
            self._remove_volume(name)
        if self.job_dir.exists():
            shutil.rmtree(self.job_dir, ignore_errors=True)
        if self._containers or self._volumes:
            log.warning("sandbox.leftovers", job=self.name, containers=len(self._containers), volumes=self._volumes)
