"""Reading and writing keep encoding, BOM, newline style and permissions; writes are atomic."""

import codecs
import os
import stat

import pytest

from npu_migrate.apply.runner import RunPlan, process_bytes
from npu_migrate.core.sources import SourceError, decode_source, write_atomic

PLAN = RunPlan(["NPU100", "NPU101"])


def migrate_bytes(data: bytes) -> bytes:
    result = process_bytes(data, "x.py", PLAN)
    assert result.outcome.error is None
    return result.new_bytes if result.new_bytes is not None else data


def test_crlf_newlines_are_kept_including_inserted_lines():
    out = migrate_bytes(b"import torch\r\nx = y.cuda()\r\n")
    assert out == b"import torch\r\nimport torch_npu  # noqa: F401\r\nx = y.npu()\r\n"


def test_bom_is_kept():
    data = codecs.BOM_UTF8 + "import torch\n# é\nx = y.cuda()\n".encode()
    out = migrate_bytes(data)
    assert out.startswith(codecs.BOM_UTF8)
    assert out[len(codecs.BOM_UTF8):].decode() == "import torch\nimport torch_npu  # noqa: F401\n# é\nx = y.npu()\n"


def test_pep263_latin1_is_kept():
    text = "# -*- coding: latin-1 -*-\nimport torch\ns = 'caf\xe9'\nx = y.cuda()\n"
    out = migrate_bytes(text.encode("latin-1"))
    assert out.decode("latin-1") == text.replace("y.cuda()", "y.npu()").replace(
        "import torch\n", "import torch\nimport torch_npu  # noqa: F401\n")
    assert b"caf\xe9" in out  # still latin-1, not utf-8


def test_file_without_trailing_newline():
    assert migrate_bytes(b"import torch\nx = y.cuda()") == b"import torch\nimport torch_npu  # noqa: F401\nx = y.npu()"


def test_undecodable_file_is_a_one_line_error():
    with pytest.raises(SourceError, match=r"^bad\.py:1:1: cannot decode"):
        decode_source(b"x = '\xff\xfe'\n", "bad.py")


def test_write_atomic_keeps_permissions_and_leaves_no_temp(tmp_path):
    target = tmp_path / "run.py"
    target.write_text("old\n")
    os.chmod(target, 0o751)
    write_atomic(str(target), b"new\n")
    assert target.read_bytes() == b"new\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o751
    assert sorted(os.listdir(tmp_path)) == ["run.py"]


def test_write_atomic_failure_leaves_original(tmp_path, monkeypatch):
    target = tmp_path / "a.py"
    target.write_text("original\n")

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(str(target), b"half")
    assert target.read_text() == "original\n"
    assert sorted(os.listdir(tmp_path)) == ["a.py"]


def test_open_regular_refuses_fifos_and_devices_without_blocking_and_follows_links(tmp_path):
    """For readers of a file the user names (`npu-migrate memory FILE`): a FIFO must not hang the
    command (a blocking open waits for a writer forever) and a device must not be read."""
    import subprocess
    import sys

    (tmp_path / "snap.pickle").write_bytes(b"data")
    (tmp_path / "link.pickle").symlink_to(tmp_path / "snap.pickle")
    os.mkfifo(tmp_path / "fifo.pickle")
    probe = (
        "import sys\nfrom npu_migrate.core.sources import Skipped, open_regular\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        with open_regular(name) as handle:\n"
        "            print(name, 'read', handle.read())\n"
        "    except Skipped as exc:\n"
        "        print(name, 'skipped', exc)\n")
    result = subprocess.run([sys.executable, "-c", probe, "snap.pickle", "link.pickle", "fifo.pickle", "/dev/zero"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "snap.pickle read b'data'" and lines[1] == "link.pickle read b'data'"
    assert lines[2].startswith("fifo.pickle skipped") and "FIFO" in lines[2]
    assert lines[3].startswith("/dev/zero skipped") and "character device" in lines[3]
