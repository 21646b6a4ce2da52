"""The harness runs the Kueue a run names (`TRAINJOB_OPERATOR_KUEUE_VERSION`) or refuses to start, saying which one
the tool cache has (hack/harness/cluster.py)."""

import pytest

from harness import cluster

VERSIONS = "kwok v0.8.0\njobset v0.12.0\ntrainer v2.3.0\nkueue v0.19.2\n"

PROBLEMS = {
    "nothing asked: any Kueue will do": (VERSIONS, None, None),
    "the version asked for is the one built": (VERSIONS, "v0.19.2", None),
    "another version asked for is refused, naming both": (
        VERSIONS,
        "v0.20.7",
        "TRAINJOB_OPERATOR_KUEUE_VERSION=v0.20.7 but the tool cache has Kueue v0.19.2; the Kueue built is the one "
        "hack/harness/tools/go.mod pins (docs/development.md: v0.19.14 and v0.20.7 are not on the Go proxy here)",
    ),
    "a tool cache without Kueue is refused": (
        "kwok v0.8.0\n",
        "v0.19.2",
        "TRAINJOB_OPERATOR_KUEUE_VERSION=v0.19.2 but the tool cache has Kueue (none); the Kueue built is the one "
        "hack/harness/tools/go.mod pins (docs/development.md: v0.19.14 and v0.20.7 are not on the Go proxy here)",
    ),
}


@pytest.mark.parametrize("case", PROBLEMS, ids=list(PROBLEMS))
def test_kueue_version_problem(case: str) -> None:
    versions, wanted, expected = PROBLEMS[case]
    assert cluster.kueue_version_problem(versions, wanted) == expected


def test_built_version_reads_the_first_word_after_the_name() -> None:
    text = VERSIONS + "volcano-podgroup-crd volcano.sh/apis v1.14.0 (controller-gen v0.19.0)\n"
    assert cluster.built_version(text, "kueue") == "v0.19.2"
    assert cluster.built_version(text, "kueuex") is None
