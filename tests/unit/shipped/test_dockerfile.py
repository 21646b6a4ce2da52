"""The Dockerfile, without a Docker engine: its shape (pinned multi-stage base, non-root user, entrypoint), and
its build steps run for real on this machine (wheel, clean virtualenv with only the runtime dependencies, the
installed command answers --help)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = REPO / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for ins in instructions():
        if ins[0] == "FROM":
            result.append([])
        if result:
            result[-1].append(ins)
    return result


def args() -> dict[str, str]:
    return dict(a.split("=", 1) for i, a in instructions() if i == "ARG" and "=" in a)


def base_image() -> str:
    return args()["PYTHON_IMAGE"]


def test_base_image_is_a_python_311_slim_pinned_by_tag_and_digest() -> None:
    assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?@sha256:[0-9a-f]{64}", base_image())


def unused() -> list[str]:
    return args()["UNUSED"].strip('"').split()


def test_the_packages_taken_out_of_the_image_are_exactly_those_the_operator_never_imports() -> None:
    """Every module of the package imported in a fresh interpreter, and what the kubeconfig helper process imports
    (the `kubernetes` loader): the lock's packages that never appear are the Dockerfile's UNUSED, and nothing else."""
    sys.path.insert(0, str(REPO / "tests" / "unit" / "project"))
    from test_lock import read

    probe = (
        "import importlib, importlib.metadata as md, pkgutil, sys, trainjob_operator\n"
        "for m in pkgutil.walk_packages(trainjob_operator.__path__, 'trainjob_operator.'):\n"
        "    importlib.import_module(m.name)\n"
        "import kubernetes.client, kubernetes.config.kube_config\n"
        "dists = md.packages_distributions()\n"
        "print('\\n'.join(sorted({d for n in list(sys.modules) for d in dists.get(n.split('.')[0], [])})))\n"
    )
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert found.returncode == 0, found.stderr[-2000:]
    imported = {name.lower().replace("_", "-") for name in found.stdout.split()}
    locked = set(read("runtime.txt"))
    assert set(unused()) <= locked
    assert sorted(locked - imported) == sorted(unused())


def test_no_installer_in_the_final_image() -> None:
    (build_run,) = [a for i, a in stages()[0] if i == "RUN"]
    assert "bin/pip uninstall --yes ${UNUSED}" in build_run
    assert "-m pip uninstall --yes pip setuptools" in build_run
    assert build_run.index("pip check") < build_run.index("uninstall")  # checked whole, then trimmed
    assert build_run.rstrip().endswith('python -c "import kubernetes.config.kube_config, kubernetes.client"')
    (final_run,) = [a for i, a in stages()[-1] if i == "RUN" and "rm -rf" in a]
    assert "/usr/local/lib/python3*/site-packages/pip*" in final_run and "/usr/local/bin/pip*" in final_run


def test_multi_stage_with_the_same_base() -> None:
    froms = [args for stage in stages() for ins, args in stage if ins == "FROM"]
    assert froms == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"]


def test_final_stage_runs_as_a_numeric_non_root_user_with_the_operator_entrypoint() -> None:
    final = stages()[-1]
    users = [args for ins, args in final if ins == "USER"]
    assert users and re.fullmatch(r"[1-9]\d*:[1-9]\d*", users[-1])
    assert json.loads(next(a for i, a in final if i == "ENTRYPOINT")) == ["trainjob-operator"]
    assert json.loads(next(a for i, a in final if i == "CMD")) == ["run"]
    # only the virtualenv crosses over: no sources, no wheels, no build tools
    copies = [a for i, a in final if i == "COPY"]
    assert copies == ["--from=build /opt/trainjob-operator /opt/trainjob-operator"]


def test_the_chart_runs_the_image_user() -> None:
    import yaml

    values = yaml.safe_load((REPO / "charts" / "trainjob-operator" / "values.yaml").read_text())
    user = next(a for i, a in stages()[-1] if i == "USER")
    assert f"{values['podSecurityContext']['runAsUser']}:{values['podSecurityContext']['runAsGroup']}" == user


def test_dockerignore_sends_only_what_the_build_copies() -> None:
    ignore = (REPO / ".dockerignore").read_text().split()
    assert ignore[0] == "*" and {"!pyproject.toml", "!README.md", "!src/", "!crds/"} <= set(ignore)
    assert {"!requirements/runtime.txt", "!requirements/build.txt"} <= set(ignore)


def test_the_image_installs_from_the_lock() -> None:
    """The build stage's pip installs nothing but the pins and hashes of `make lock`'s files."""
    (run,) = [a for ins, a in stages()[0] if ins == "RUN"]
    assert "--require-hashes -r requirements/build.txt" in run
    assert "--no-build-isolation" in run  # the build backend is the one build.txt pinned, not the newest
    assert "--require-hashes -r requirements/runtime.txt" in run
    assert "pip install --no-deps /wheels/" in run


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_build_steps_install_a_working_operator(tmp_path: Path) -> None:
    """setuptools from the build lock, `pip wheel . --no-deps`, a clean venv with the runtime lock, the wheel,
    `pip check`, then --help."""
    context = tmp_path / "context"  # what .dockerignore lets into the build context
    (context / "requirements").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md", "requirements/runtime.txt", "requirements/build.txt"):
        shutil.copy(REPO / name, context / name)
    shutil.copytree(REPO / "crds", context / "crds")
    shutil.copytree(
        REPO / "src",
        context / "src",
        symlinks=True,  # as `COPY` does: the crds link stays a link
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")
    wheels = tmp_path / "wheels"

    def run(*cmd: object, cwd: Path = tmp_path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)

    builder = tmp_path / "build"  # the build stage's Python
    assert run(sys.executable, "-m", "venv", builder).returncode == 0
    backend = run(builder / "bin" / "pip", "install", "--require-hashes", "-r", "requirements/build.txt", cwd=context)
    assert backend.returncode == 0, backend.stderr[-3000:]
    built = run(
        builder / "bin" / "pip", "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", wheels, ".", cwd=context
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("trainjob_operator-*.whl")

    venv = tmp_path / "venv"
    made = run(sys.executable, "-m", "venv", venv)
    assert made.returncode == 0, made.stderr
    locked = run(venv / "bin" / "pip", "install", "--require-hashes", "-r", "requirements/runtime.txt", cwd=context)
    assert locked.returncode == 0, locked.stderr[-3000:]
    installed = run(venv / "bin" / "pip", "install", "--no-deps", wheel)
    assert installed.returncode == 0, installed.stderr[-3000:]
    checked = run(venv / "bin" / "pip", "check")
    assert checked.returncode == 0, checked.stdout
    # listed before the trim (the versions check below), then trimmed as the image is
    frozen = run(venv / "bin" / "pip", "list", "--format=json")
    trimmed = run(venv / "bin" / "pip", "uninstall", "--yes", *unused())
    assert trimmed.returncode == 0, trimmed.stderr
    no_pip = run(venv / "bin" / "python", "-m", "pip", "uninstall", "--yes", "pip", "setuptools")
    assert no_pip.returncode == 0, no_pip.stderr
    assert run(venv / "bin" / "python", "-m", "pip", "--version").returncode != 0
    helper = run(venv / "bin" / "python", "-c", "import kubernetes.config.kube_config, kubernetes.client")
    assert helper.returncode == 0, helper.stderr

    helped = run(venv / "bin" / "trainjob-operator", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "run" in helped.stdout
    run_help = run(venv / "bin" / "trainjob-operator", "run", "--help")
    assert run_help.returncode == 0, run_help.stderr
    for flag in ("--kubeconfig", "--context", "--config", "--health-port", "--webhook-port", "--operator-namespace"):
        assert flag in run_help.stdout

    # only the runtime dependencies (pyproject [project].dependencies and theirs), none of the dev tools
    names = {p["name"].lower().replace("_", "-") for p in json.loads(frozen.stdout)}
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for requirement in declared["dependencies"]:
        assert re.split(r"[<>=!~\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-") in names
    dev_only = {"pytest", "ruff", "mypy", "hypothesis", "kubeflow", "import-linter", "uv"}
    assert names & dev_only == set()
    # exactly the versions the lock pins (test_lock is in tests/unit/project, on the path only when collected first)
    sys.path.insert(0, str(REPO / "tests" / "unit" / "project"))
    from test_lock import read

    versions = {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(frozen.stdout)}
    assert {name: versions.get(name) for name in read("runtime.txt")} == {
        name: version for name, (version, _) in read("runtime.txt").items()
    }
    # the package data the operator needs at run time is in the wheel
    shown = run(
        venv / "bin" / "python",
        "-c",
        "import trainjob_operator, pathlib; print(pathlib.Path(trainjob_operator.__file__).parent)",
    )
    assert (Path(shown.stdout.strip()) / "py.typed").exists()
    assert (Path(shown.stdout.strip()) / "crds" / "trainer.kubeflow.org_trainjobs.yaml").is_file()
    flux_scripts = Path(shown.stdout.strip()) / "runtime" / "plugins" / "flux" / "scripts"
    assert sorted(p.name for p in flux_scripts.glob("*.sh")) == ["entrypoint.sh", "init.sh"]
    assert str(tmp_path) in shown.stdout  # the clean venv, not the checkout
