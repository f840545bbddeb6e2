"""Limit profiles: the container limits a job gets from the operations its skill declares, and what lifts a limit.

A skill that declares no operations (all of the public collection) gets the defaults of :class:`SandboxSettings`.
A declared operation with a profile in ``sandbox.profiles`` raises the limits it names; with several, the largest
value of each field wins. When a call dies of a limit, :func:`lift_hint` says which call argument or declaration
would give it more room.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from orchestrator.config import LimitProfile, SandboxSettings

LimitName = Literal["timeout", "memory", "pids", "tmp"]
_FIELDS: dict[LimitName, str] = {
    "timeout": "timeout_cap_s",
    "memory": "memory_mb",
    "pids": "pids_limit",
    "tmp": "tmp_size_mb",
}
_UNITS = {"timeout_cap_s": "s", "memory_mb": " MiB", "pids_limit": " processes", "tmp_size_mb": " MiB"}


def apply_operations(settings: SandboxSettings, operations: Iterable[str]) -> SandboxSettings:
    """``settings`` raised by the profiles of ``operations`` (unknown operations change nothing)."""
    changes: dict[str, float | int] = {}
    for operation in operations:
        profile = settings.profiles.get(operation)
        if profile is None:
            continue
        for name, value in profile.model_dump(exclude_none=True).items():
            if value > max(changes.get(name, 0), getattr(settings, name)):
                changes[name] = value
    return settings.model_copy(update=changes) if changes else settings


def call_timeout(settings: SandboxSettings, requested_s: float | None, default_s: float) -> float:
    """The time a call gets: what it asked for (or the default), never more than the cap."""
    wanted = default_s if requested_s is None else requested_s
    return max(min(wanted, settings.timeout_cap_s), 0.1)


def lift_hint(settings: SandboxSettings, limit: LimitName, *, timeout_s: float | None = None) -> str:
    """What would give a call more of ``limit``: a larger ``timeout_s``, a declared operation, or neither."""
    if limit == "timeout" and timeout_s is not None and timeout_s < settings.timeout_cap_s:
        return f"pass timeout_s up to {settings.timeout_cap_s:g} (the cap) on the call"
    field = _FIELDS[limit]
    current = getattr(settings, field)
    better = _best_profile(settings.profiles, field, current)
    if better is None:
        return "no declaration raises this limit further: split the work into smaller calls"
    operation, value = better
    return (
        f"declare `operations: [{operation}]` under `metadata:` in the skill's SKILL.md "
        f"({field} {value:g}{_UNITS[field]} instead of {current:g}{_UNITS[field]})"
    )


def _best_profile(profiles: dict[str, LimitProfile], field: str, current: float) -> tuple[str, float] | None:
    candidates = [
        (operation, getattr(profile, field))
        for operation, profile in sorted(profiles.items())
        if getattr(profile, field) is not None and getattr(profile, field) > current
    ]
    return max(candidates, key=lambda item: item[1]) if candidates else None
