"""No file a sandboxed command writes keeps a set-id bit, however it is made (tools/setid.py):
the seccomp filter refuses the modes inside bubblewrap, the repository bind is nosuid, and the
scan afterwards clears whatever a command left. Real bubblewrap, real processes, run as root
where the machine lets us (a root-owned set-id program is the dangerous case)."""
from __future__ import annotations

import io
import os
import stat
import sys
import tarfile

import pytest

from clover_cli.modes.fix.run import FixOptions, run_test
from clover_cli.tools import sandbox, setid
from clover_cli.tools.shell import run_shell

needs_bwrap = pytest.mark.skipif(not sandbox.status().available,
                                 reason=f"no bubblewrap sandbox here: {sandbox.status().reason}")
MAKERS = {
    "cp+chmod 4755": "cp /bin/sh x && chmod 4755 x",
    "chmod u+s from Python": f"cp /bin/sh x && {sys.executable} -c 'import os; os.chmod(\"x\", 0o4755)'",
    "chmod 2755": "cp /bin/sh x && chmod 2755 x",
    "install -m 4755": "install -m 4755 /bin/sh x",
    "open with mode 4755": f"{sys.executable} -c 'import os; os.close(os.open(\"x\", os.O_CREAT | os.O_WRONLY, 0o6755))'",
    "tar -p": "tar -xpf setid.tar",
    "mknod": f"{sys.executable} -c 'import os, stat; os.mknod(\"x\", stat.S_IFREG | 0o4755)'",
}


def setid_files(root) -> list[str]:
    out = []
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        out += [os.path.join(here, f) for f in files
                if os.lstat(os.path.join(here, f)).st_mode & (stat.S_ISUID | stat.S_ISGID)]
    return out


@pytest.fixture(autouse=True)
def _fresh(fresh_sandbox):
    pass


@pytest.fixture
def archive(git_repo):
    """An archive in the repository holding a root-owned mode 4755 program."""
    path = git_repo / "setid.tar"
    data = b"#!/bin/sh\nid\n"
    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo("x")
        info.size, info.mode, info.uid, info.gid = len(data), 0o4755, 0, 0
        tar.addfile(info, io.BytesIO(data))
    return path


@needs_bwrap
@pytest.mark.parametrize("how", sorted(MAKERS))
def test_no_set_id_file_survives_a_sandboxed_command(git_repo, archive, how):
    res = run_shell(git_repo, MAKERS[how] + "; ls -l x", sandbox_profile="workspace")
    assert res.details["sandbox"] == "bwrap:workspace"
    assert setid_files(git_repo) == [], res.output
    if "chmod" in how or how.startswith(("install", "tar")):  # made, only the bits refused
        assert (git_repo / "x").exists(), res.output


@needs_bwrap
def test_inside_the_sandbox_set_id_does_not_apply(git_repo):
    res = run_shell(git_repo, f"grep NoNewPrivs /proc/self/status; grep ' {git_repo} ' /proc/self/mountinfo",
                    sandbox_profile="workspace")
    assert "NoNewPrivs:\t1" in res.output, res.output
    assert "nosuid" in res.output.splitlines()[1], res.output


@pytest.mark.parametrize("machine", sorted(setid.ARCHES))
def test_the_filter_is_a_whole_program(machine):
    prog = setid.filter_program(machine)
    assert prog is not None and len(prog) % 8 == 0 and len(prog) // 8 < 256
    assert setid.filter_program("no-such-machine") is None


def test_the_scan_clears_what_a_command_changed_and_leaves_older_files(tmp_path):
    (tmp_path / "sub").mkdir()
    new, link = tmp_path / "sub" / "new", tmp_path / "link"
    new.write_bytes(b"#!/bin/sh\n")
    new.chmod(0o6755)
    link.symlink_to(new)
    since = new.stat().st_ctime  # the change's own time: no gap between the chmod and a clock read
    assert sandbox.clear_setid(tmp_path, since + 10) == []  # changed before the command: kept
    assert sandbox.clear_setid(tmp_path, since) == [str(new)]
    assert stat.S_IMODE(new.stat().st_mode) == 0o755


@pytest.mark.parametrize("how", ["cp+chmod 4755", "chmod 2755", "tar -p"])
def test_without_bubblewrap_the_bits_are_cleared_after_the_command(git_repo, archive, monkeypatch, how):
    """No filter (CLOVER_SANDBOX=off): the file is set-id while the command runs, then cleared."""
    monkeypatch.setenv("CLOVER_SANDBOX", "off")
    res = run_shell(git_repo, MAKERS[how] + "; stat -c %a x", sandbox_profile="workspace")
    assert res.details["sandbox"] == "none"
    if os.geteuid() == 0:  # root keeps the bits it sets; the scan is what removes them
        assert "\n4755\n" in "\n" + res.output or "\n2755\n" in "\n" + res.output, res.output
        assert "[set-id bits cleared on x" in res.output, res.output
    assert setid_files(git_repo) == [], res.output
    assert (git_repo / "x").exists()


@pytest.mark.parametrize("sandboxed", [True, False])
def test_fix_test_commands_leave_no_set_id_file(git_repo, monkeypatch, sandboxed):
    """`clover fix`'s test command runs under tools/setid.py, sandboxed or not."""
    if not sandboxed:
        monkeypatch.setenv("CLOVER_SANDBOX", "off")
    code = "import os, shutil; shutil.copy('/bin/sh', 'x'); os.chmod('x', 0o755); " \
           "exec(\"try:\\n os.chmod('x', 0o4755)\\nexcept OSError: pass\")"
    run = run_test(FixOptions(test="t", root=git_repo), [sys.executable, "-c", code])
    assert (git_repo / "x").exists(), run.output
    assert setid_files(git_repo) == [], run.output
