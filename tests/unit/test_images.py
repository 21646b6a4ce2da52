"""Image keys of the real nodes' images (hack/trainjob_dev/images.py): a changed recipe or input is a new
reference, an unchanged one the same."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest

from trainjob_dev import images

pytestmark = pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg-query (Debian)")


def _installed(package: str) -> bool:
    try:
        images._deb_version(package)
    except images.ImageError:
        return False
    return True


@pytest.mark.skipif(not _installed("busybox-static"), reason="busybox-static is not installed")
def test_a_changed_recipe_is_a_new_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    before = images.ref("busybox")
    assert before == images.ref("busybox")
    assert before.startswith(f"{images.REPOSITORY}/busybox:")
    changed = copy.deepcopy(images.RECIPES)
    changed["busybox"]["cmd"] = ["/bin/ash"]
    monkeypatch.setattr(images, "RECIPES", changed)
    assert images.ref("busybox") != before


@pytest.mark.skipif(not _installed("mmdebstrap"), reason="mmdebstrap is not installed")
def test_the_operator_key_follows_the_dockerfiles_inputs(tmp_path: Path) -> None:
    for name in images.OPERATOR_INPUTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "README.md").write_text("")
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "a.py").write_text("A = 1\n")
    (tmp_path / "crds").mkdir()
    before = images.operator_key(tmp_path)
    (tmp_path / "src" / "pkg" / "__pycache__").mkdir()
    (tmp_path / "src" / "pkg" / "__pycache__" / "a.pyc").write_bytes(b"\0")
    assert images.operator_key(tmp_path) == before  # bytecode is not an input
    (tmp_path / "src" / "pkg" / "a.py").write_text("A = 2\n")
    assert images.operator_key(tmp_path) != before
