"""Host-side parsing of untrusted outputs is bounded: zip bombs, XML that explodes in memory, YAML alias bombs and
huge files fail the contract with a clear violation instead of eating the host."""

from __future__ import annotations

import multiprocessing
import os
import resource
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from validator_helpers import make_deck

from orchestrator.isolation import Bounded, run_bounded
from orchestrator.validate import ContractRules, ExpectedOutputs, ValidationReport, contract, validate_outputs


def check(out: Path, **required: object) -> ValidationReport:
    rules = ContractRules.from_mapping({"required": [required]} if required else {}, source="test")
    return validate_outputs(out, ExpectedOutputs(rules=rules))


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _bomb(path: Path, part: str, size: int, chunk: bytes = b" ") -> Path:
    """A real Office-shaped package whose ``part`` inflates to ``size`` bytes (a few hundred KB on disk)."""
    make_deck(path, 1)
    with zipfile.ZipFile(path) as original:
        members = {i.filename: original.read(i) for i in original.infolist()}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as package:
        for name, data in members.items():
            if name != part:
                package.writestr(name, data)
        with package.open(part, "w", force_zip64=True) as fh:
            fh.write(b"<?xml version='1.0'?><p:presentation xmlns:p='x'>")
            block = chunk * (1 << 20)
            for _ in range(size >> 20):
                fh.write(block)
            fh.write(b"</p:presentation>")
    return path


def test_a_small_package_that_inflates_past_the_caps_fails_the_contract(out: Path) -> None:
    bomb = _bomb(out / "deck.pptx", "ppt/presentation.xml", 200 << 20)
    assert bomb.stat().st_size < 8 << 20
    before = _peak_mb()
    started = time.monotonic()
    report = check(out, path="deck.pptx", kind="pptx")
    assert time.monotonic() - started < 60
    assert not report.pass_ and report.stage == "contract"
    assert any("deck.pptx" in v and "limit" in v for v in report.violations), report.violations
    assert _peak_mb() - before < 200  # the host process never held the inflated part


def test_a_part_under_the_caps_that_explodes_in_the_parser_hits_the_memory_bound(out: Path, monkeypatch) -> None:
    # 40 MiB of tiny elements: under every zip cap, but far more than 256 MiB once parsed into a tree.
    monkeypatch.setattr(contract, "CHECK_MEMORY_MB", 256)
    _bomb(out / "deck.pptx", "ppt/presentation.xml", 40 << 20, chunk=b"<a/>")
    report = check(out, path="deck.pptx", kind="pptx")
    assert not report.pass_
    assert any("deck.pptx" in v for v in report.violations), report.violations


def test_a_yaml_alias_bomb_under_a_schema_stops_at_the_time_bound(out: Path, monkeypatch) -> None:
    monkeypatch.setattr(contract, "CHECK_TIMEOUT_S", 3.0)
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    (out / "bomb.yaml").write_text("\n".join(lines) + "\n")
    schema = {"type": "object", "additionalProperties": {"$ref": "#/$defs/n"},
              "$defs": {"n": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]}}}
    started = time.monotonic()
    report = check(out, path="bomb.yaml", kind="yaml", schema=schema)
    assert time.monotonic() - started < 30
    assert not report.pass_
    assert any("bomb.yaml" in v and "within limits" in v for v in report.violations), report.violations


def test_json_too_large_to_parse_is_a_violation_not_a_read(out: Path, monkeypatch) -> None:
    monkeypatch.setattr(contract, "MAX_PARSE_BYTES", 1 << 20)
    (out / "big.json").write_text("[" + "1," * (1 << 20) + "1]")
    report = check(out, path="big.json", kind="json")
    assert not report.pass_ and any("big.json" in v and "limit" in v for v in report.violations)


def test_deeply_nested_json_is_a_violation_not_a_crash(out: Path) -> None:
    (out / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    report = check(out, path="deep.json", kind="json")
    assert not report.pass_ and any("deep.json" in v for v in report.violations)


def test_a_large_text_file_is_streamed(out: Path) -> None:
    with (out / "big.txt").open("w") as fh:
        for _ in range(64):
            fh.write("line of text\n" * 80_000)
    fh_bad = out / "late.md"
    fh_bad.write_bytes(b"ok\n" * 500_000 + b"\xff")
    report = check(out)
    assert any("late.md is not UTF-8" in v and "1500000" in v for v in report.violations), report.violations
    assert not any("big.txt" in v for v in report.violations)


def _allocate(mb: int) -> int:
    return len(bytearray(mb << 20))


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def test_the_bounded_child_stops_at_its_memory_and_time_limits() -> None:
    assert run_bounded(_allocate, 16, memory_mb=512) == 16 << 20
    with pytest.raises(Bounded) as memory:
        run_bounded(_allocate, 4096, memory_mb=256)
    assert memory.value.bound in ("memory", "crash")
    started = time.monotonic()
    with pytest.raises(Bounded) as slow:
        run_bounded(_sleep, 60, timeout_s=1)
    assert slow.value.bound == "time" and time.monotonic() - started < 10


def _bounded_in_child(results: Any) -> None:
    results.put(run_bounded(_allocate, 1, memory_mb=512, timeout_s=20))


def test_a_daemonic_parent_such_as_a_celery_prefork_worker_can_run_the_bounded_child() -> None:
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    parent = ctx.Process(target=_bounded_in_child, args=(results,), daemon=True)
    parent.start()
    try:
        assert results.get(timeout=60) == 1 << 20
    finally:
        parent.join(10)
    assert parent.exitcode == 0


_LEFT_BEHIND: list[str] = []


def _leave_state(mark: str) -> list[str]:
    _LEFT_BEHIND.append(mark)
    os.environ["BOUNDED_MARK"] = mark
    return list(_LEFT_BEHIND)


def test_every_call_gets_a_fresh_child_even_when_it_was_started_ahead() -> None:
    # A hostile input that takes over the child (module state, environment) must not reach the next call.
    assert run_bounded(_leave_state, "first", timeout_s=20) == ["first"]
    time.sleep(1)  # let the child started ahead finish its imports
    assert run_bounded(_leave_state, "second", timeout_s=20) == ["second"]
    assert "BOUNDED_MARK" not in os.environ and _LEFT_BEHIND == []

