"""The harness runs the Kueue a run names (`KUEUE_VERSION`) or refuses to start, saying which one the tool cache has
and how to build the one asked for (hack/harness/cluster.py); each version has its own cache directory."""

import pytest

from harness import cluster

VERSIONS = "kwok v0.8.0\njobset v0.12.0\ntrainer v2.3.0\nkueue v0.19.2\n"

PROBLEMS = {
    "nothing asked: any Kueue will do": (VERSIONS, None, None),
    "the version asked for is the one built": (VERSIONS, "v0.19.2", None),
    "the version asked for without its v is the one built": (VERSIONS, "0.19.2", None),
    "another version asked for is refused, naming both and how to build it": (
        VERSIONS,
        "0.17.0",
        "KUEUE_VERSION=v0.17.0 but the tool cache has Kueue v0.19.2 there; run `make tools-kueue KUEUE_VERSION=0.17.0` "
        '(docs/compatibility.md, "Kubernetes versions")',
    ),
    "a tool cache without Kueue is refused": (
        "kwok v0.8.0\n",
        "v0.19.2",
        "KUEUE_VERSION=v0.19.2 but the tool cache has Kueue (none) there; run `make tools-kueue KUEUE_VERSION=0.19.2` "
        '(docs/compatibility.md, "Kubernetes versions")',
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


def test_each_kueue_version_has_its_own_directory_and_an_unknown_one_is_refused_saying_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(cluster.KUEUE_VERSION_ENV, raising=False)
    default = cluster.tools_bin_dir()
    assert cluster.kueue_dir(default) == default
    monkeypatch.setenv(cluster.KUEUE_VERSION_ENV, "0.19.2")  # the pinned one: build.sh's directory
    assert cluster.kueue_dir(default) == default
    monkeypatch.setenv(cluster.KUEUE_VERSION_ENV, "v0.17.0")
    other = cluster.kueue_dir(default)
    assert other.parent.name == "kueue" and other.name.startswith("v0.17.0-")
    monkeypatch.setenv(cluster.KUEUE_VERSION_ENV, "0.18.1")
    with pytest.raises(cluster.ClusterError, match=r"no module pins kueue v0\.18\.1 \(hack/harness/tools/kueue-0\.18"):
        cluster.kueue_dir(default)
