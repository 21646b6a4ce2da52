"""Progress from a pod on Python 3.13, for real (issue 33): Debian trixie's Python turns on `VERIFY_X509_STRICT` in
`ssl.create_default_context()`, and urllib3 2 does on 3.13 too, so a status-server certificate without key
identifiers, leaf BasicConstraints or KeyUsage failed the handshake ("Missing Authority Key Identifier") and
progress silently stopped. Here the unmodified kubeflow SDK (0.5.0, hash-locked in
`requirements/images/sdk-trixie.txt`) in an image built from trixie calls `update_trainjob_status()` inside a trainer
pod on a real node, and the update lands in `status.trainerStatus`. The pod first checks, with the same CA, that its
default context is strict and that the handshake passes, so a failure names the cause."""

from __future__ import annotations

import re

import pytest
from real_runtimes import run_one_pod

from harness import images, realnodes
from operator_fixtures import Kube, OperatorProcess, condition

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]
#: The images this module runs, imported into the nodes ahead of it (conftest.py, `prefetch_images`).
IMAGES = ("sdk-trixie",)

SDK_CALL = """
import os, socket, ssl, sys, urllib.parse
from kubeflow.trainer import update_trainjob_status
context = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
strict = bool(context.verify_flags & ssl.VERIFY_X509_STRICT)
print(f"python {sys.version_info[0]}.{sys.version_info[1]} {ssl.OPENSSL_VERSION} strict={strict}", flush=True)
url = urllib.parse.urlsplit(os.environ["KUBEFLOW_TRAINER_SERVER_URL"])
with socket.create_connection((url.hostname, url.port), timeout=30) as raw:
    with context.wrap_socket(raw, server_hostname=url.hostname) as tls:
        print(f"strict handshake {tls.version()}", flush=True)
ok = update_trainjob_status(progress_percent=77, estimated_remaining_seconds=30, metrics={"loss": 0.125})
print(f"update_trainjob_status returned {ok}", flush=True)
sys.exit(0 if ok else 1)
"""


@pytest.mark.realnode_ci
def test_the_sdk_on_python_313_reports_progress_through_strict_tls(
    kube: Kube, operator: OperatorProcess, namespace: str
) -> None:
    run = run_one_pod(
        kube, namespace, "strict", realnodes.load_image(kube.cluster, "sdk-trixie"), "sdk-trixie", SDK_CALL
    )
    job, log = run.job, run.log
    assert condition(job, "Complete"), (job.get("status"), log, operator.log())
    assert re.search(r"^python 3\.13 OpenSSL \S+ .*strict=True$", log, re.M), log
    assert "strict handshake TLSv1.3" in log, log
    assert "update_trainjob_status returned True" in log, log
    trainer_status = dict(job["status"]["trainerStatus"])
    trainer_status.pop("lastUpdatedTime")
    assert trainer_status == {
        "progressPercentage": 77,
        "estimatedRemainingSeconds": 30,
        "metrics": [{"name": "loss", "value": "0.125"}],
    }
    print(
        f"progress from Python 3.13: Complete {run.seconds:.1f}s after creation; {log.splitlines()[0]}; "
        f"image {images.metadata('sdk-trixie')}"
    )
