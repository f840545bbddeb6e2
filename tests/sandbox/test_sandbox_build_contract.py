"""Attacks on build/ beyond its byte limit: sparse files, inode floods, odd names; and odd stdout."""

from __future__ import annotations

import shutil
from pathlib import Path


def test_a_sparse_file_larger_than_the_disk_limit_is_removed_and_never_copied_out(make_skill, open_job, tmp_path):
    # The export comes first here: build/ is checked before anything leaves it, whichever way it is read.
    root = make_skill({"sparse.sh": "truncate -s 3G build/sparse.bin\necho 'kept' > build/ok.txt\necho '{}'\n"})
    job = open_job(root, disk_mb=4)
    assert job.run_script("sparse.sh").ok
    usage_before = shutil.disk_usage(tmp_path).used
    job.export(tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["ok.txt"]
    assert shutil.disk_usage(tmp_path).used - usage_before < 64 * 1024 * 1024
    assert any("sparse.bin" in v and "disk_limit" in v for v in job.take_pruned())
    assert [f.path for f in job.list_files()] == ["ok.txt"] and job.take_pruned() == []


def test_many_small_sparse_files_cannot_add_up_past_the_limit(make_skill, open_job, tmp_path):
    root = make_skill({"many.sh": "for i in $(seq 1 20); do truncate -s 3M build/f$i.bin; done\necho '{}'\n"})
    job = open_job(root, disk_mb=4)
    assert job.run_script("many.sh").ok
    assert job.list_files() == []
    assert len([v for v in job.take_pruned() if "sparse file" in v]) == 20


def test_an_empty_file_flood_stops_at_the_inode_limit(make_skill, open_job):
    root = make_skill({"flood.py": """
        import errno, json
        made, code = 0, None
        try:
            while made < 1_000_000:
                open(f"build/{made}", "w").close()
                made += 1
        except OSError as e:
            code = errno.errorcode.get(e.errno)
        print(json.dumps({"made": made, "errno": code}))
    """})
    result = open_job(root, disk_mb=4).run_script("flood.py", timeout_s=30)
    assert result.ok, result.reason
    assert result.stdout_json["errno"] == "ENOSPC" and result.stdout_json["made"] < 2000


def test_a_file_name_that_is_not_utf8_is_removed_and_reported(make_skill, open_job):
    root = make_skill({"name.sh": "printf x > build/$'\\xff\\xfe.bin'\nprintf y > build/fine.txt\necho '{}'\n"})
    job = open_job(root)
    assert job.run_script("name.sh").ok
    assert [f.path for f in job.list_files()] == ["fine.txt"]
    assert any("not UTF-8" in v for v in job.take_pruned())


def test_absurdly_nested_json_on_stdout_is_not_json_not_a_crash(make_skill, open_job):
    root = make_skill({"deep.py": "import sys\nsys.stdout.write('[' * 200000 + ']' * 200000)\n"})
    result = open_job(root).run_script("deep.py")
    assert not result.ok and result.reason == "stdout is not JSON" and result.exit_code == 0


def test_exiting_with_137_is_not_reported_as_out_of_memory(make_skill, open_job):
    root = make_skill({"fake.sh": "exit 137\n"})
    result = open_job(root).run_script("fake.sh")
    assert not result.ok and result.exit_code == 137 and not result.oom_killed
    assert not any(v.startswith("memory_limit") for v in result.violations)


def test_the_host_build_folder_holds_only_regular_files_after_export(make_skill, open_job, tmp_path: Path):
    root = make_skill({"links.sh": "ln -s / build/rootlink\nmkfifo build/pipe\necho hi > build/real.txt\n"
                                   "echo '{}'\n"})
    job = open_job(root)
    assert job.run_script("links.sh").ok
    job.export(tmp_path / "out")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["real.txt"]


def test_a_listing_is_read_once_and_again_after_anything_may_have_changed_build(make_skill, open_job, monkeypatch):
    from orchestrator.sandbox.buildfolder import BuildFolder

    reads: list[str] = []
    original = BuildFolder._read_build

    def counted(self, what, read):  # type: ignore[no-untyped-def]
        reads.append(what)
        return original(self, what, read)

    monkeypatch.setattr(BuildFolder, "_read_build", counted)
    root = make_skill({
        "add.sh": "echo b > build/b.txt\necho '{}'\n",
        "late.sh": "echo c > build/c.txt\nsleep 30\n",
    })
    job = open_job(root)
    job.write_file("a.txt", b"a")
    assert [f.path for f in job.list_files()] == ["a.txt"]
    assert [f.path for f in job.list_files()] == ["a.txt"] and reads == ["list"]
    assert job.run_script("add.sh").ok
    assert [f.path for f in job.list_files()] == ["a.txt", "b.txt"] and reads == ["list", "list"]
    job.write_file("a.txt", b"changed")
    assert {f.path: f.size for f in job.list_files()}["a.txt"] == len(b"changed")
    # A call that ends badly (here: past its time limit) may still have written: build/ is read again.
    assert not job.run_script("late.sh", timeout_s=2).ok
    assert "c.txt" in [f.path for f in job.list_files()]
