"""Upstream's own inputs (`../shared/upstream-corpus`: runtimes, examples, docs YAML, e2e TrainJobs, unit-test
tables) replayed through the CLI by the shared `check.py`, with the documented v2.4 delta (D23) applied by
`hack/upstream_corpus.py`. Every case must pass: a failure prints the case and what differs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
RUNNER = REPO / "hack" / "upstream_corpus.py"

spec = importlib.util.spec_from_file_location("upstream_corpus", RUNNER)
assert spec is not None and spec.loader is not None
runner = importlib.util.module_from_spec(spec)
spec.loader.exec_module(runner)
CORPUS: Path = runner.DEFAULT_CORPUS


def cli() -> str:
    script = Path(sys.executable).parent / "trainjob-operator"
    return str(script)


def launcher_jobset(env: list[dict[str, str]], image: str = "rt:launcher") -> dict[str, Any]:
    def job(name: str, ctr_env: list[dict[str, str]], ctr_image: str) -> dict[str, Any]:
        return {
            "name": name,
            "template": {
                "spec": {"template": {"spec": {"containers": [{"name": "node", "image": ctr_image, "env": ctr_env}]}}}
            },
        }

    return {
        "kind": "JobSet",
        "metadata": {"name": "job"},
        "spec": {"replicatedJobs": [job("launcher", env, image), job("node", [], "rt:node")]},
    }


ORTE = [
    {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
    {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
    {"name": "OMPI_MCA_orte_set_default_slots", "value": "4"},
    {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=10"},
]
PRTE = [
    {"name": "PRTE_MCA_prte_default_hostfile", "value": "/etc/mpi/hostfile"},
    {"name": "PRTE_MCA_prte_keep_fqdn_hostnames", "value": "false"},
    {"name": "PRTE_MCA_prte_set_default_slots", "value": "4"},
    {"name": "PRTE_MCA_plm_ssh_args", "value": "-o ConnectionAttempts=10"},
]
MPI_RUNTIME = {"kind": "TrainingRuntime", "metadata": {"name": "rt"}, "spec": {"mlPolicy": {"mpi": {}}}}
TORCH_RUNTIME = {"kind": "TrainingRuntime", "metadata": {"name": "rt"}, "spec": {"mlPolicy": {"torch": {}}}}


def trainjob(image: str | None = None) -> dict[str, Any]:
    trainer = {"image": image} if image else {}
    return {"kind": "TrainJob", "metadata": {"name": "job"}, "spec": {"runtimeRef": {"name": "rt"}, "trainer": trainer}}


@pytest.mark.parametrize(
    ("objects", "trainjobs", "runtimes", "want"),
    [
        pytest.param(
            [launcher_jobset(ORTE)],
            [trainjob()],
            [MPI_RUNTIME],
            [launcher_jobset(ORTE + PRTE)],
            id="the PRTE env follows the ORTE values, keep_fqdn false",
        ),
        pytest.param(
            [launcher_jobset(ORTE)],
            [trainjob("user:app")],
            [MPI_RUNTIME],
            [
                {
                    **launcher_jobset(ORTE + PRTE, "user:app"),
                    "spec": {
                        "replicatedJobs": [
                            launcher_jobset(ORTE + PRTE, "user:app")["spec"]["replicatedJobs"][0],
                            {
                                **launcher_jobset([])["spec"]["replicatedJobs"][1],
                                "template": {
                                    "spec": {
                                        "template": {
                                            "spec": {"containers": [{"name": "node", "image": "user:app", "env": []}]}
                                        }
                                    }
                                },
                            },
                        ]
                    },
                }
            ],
            id="the TrainJob image goes on the launcher and the nodes",
        ),
        pytest.param(
            [launcher_jobset(ORTE)],
            [trainjob("user:app")],
            [TORCH_RUNTIME],
            [launcher_jobset(ORTE)],
            id="a runtime without mlPolicy.mpi is left as upstream v2.3 built it",
        ),
    ],
)
def test_v24_delta_of_upstream_expectations(
    objects: list[dict[str, Any]],
    trainjobs: list[dict[str, Any]],
    runtimes: list[dict[str, Any]],
    want: list[dict[str, Any]],
) -> None:
    assert runner.v24_objects(objects, trainjobs, runtimes) == want


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(
    not (CORPUS / "check.py").is_file(),
    reason=f"the shared upstream corpus is not at {CORPUS} (../shared is absent; TRAINJOB_UPSTREAM_CORPUS moves it)",
)
def test_upstream_corpus_passes_every_case() -> None:
    result = subprocess.run(
        [sys.executable, str(RUNNER), cli(), "--corpus", str(CORPUS)],
        capture_output=True,
        text=True,
        timeout=1700,
        check=False,
    )
    lines = result.stdout.strip().splitlines()
    failures = [line for line in lines if line.startswith("FAIL ")]
    assert (result.returncode, failures) == (0, []), result.stdout[-4000:] + result.stderr[-2000:]
    total = lines[-1].split()[-2].split("/")
    assert lines[-1].startswith("external: ") and total[0] == total[1], lines[-1]
