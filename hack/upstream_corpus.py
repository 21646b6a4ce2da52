#!/usr/bin/env python3
"""Replay upstream's own inputs (`../shared/upstream-corpus`) through our CLI with the shared `check.py`, with
this project's documented v2.4 differences applied to upstream v2.3.0's expectations.

    python hack/upstream_corpus.py [CLI] [--corpus DIR] [-v] [-k SUBSTRING]

The corpus' expectations are what upstream **v2.3.0** builds. Where this operator deliberately follows
**v2.4** instead (docs/compatibility.md, D23: the Open MPI 5 `PRTE_MCA_*` env beside the ORTE env on the MPI
launcher, upstream #4029; the TrainJob image on the MPI launcher and nodes, #4301), the expected objects of the
affected cases are rewritten by exactly that delta and the case is marked `deliberate: D23`, so `check.py`
reports it as KNOWN when our output is v2.3's plus the delta and nothing else. The corpus was also written while this
project had no Flux plugin (its difference D3, retired): those cases take upstream's verdict again, or keep their
checks under D12 (Flux's scripts are our own text). The corpus itself is read-only: the rewrite happens in a
temporary copy. The oracle stored objects as the API server does for a client that asks for no field validation
(the SDK, client libraries): unknown fields pruned. Our CLI, as kubectl, refuses them by default, so the corpus runs
it with `--validate=warn` (upstream's own docs carry such fields: `mlPolicy.torch.numProcPerNode`). Exit status:
`check.py`'s (0 only when every case passes).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]


def default_corpus(repo: Path = REPO) -> Path:
    """`$TRAINJOB_UPSTREAM_CORPUS`, else `../shared/upstream-corpus` beside the checkout, else beside the main checkout
    when this one is a git worktree (its `.git` file names `<main>/.git/worktrees/<name>`): the path given first when
    none has the corpus, so the message names where it was expected."""
    if env := os.environ.get("TRAINJOB_UPSTREAM_CORPUS"):
        return Path(env)
    beside = repo.parent / "shared" / "upstream-corpus"
    dot_git = repo / ".git"
    if not beside.is_dir() and dot_git.is_file():
        gitdir = Path(dot_git.read_text().removeprefix("gitdir:").strip())
        main = gitdir.parent.parent.parent  # <main>/.git/worktrees/<name> -> <main>
        if (main.parent / "shared" / "upstream-corpus").is_dir():
            return main.parent / "shared" / "upstream-corpus"
    return beside


DEFAULT_CORPUS = default_corpus()
DEFAULT_CLI = REPO / ".venv" / "bin" / "trainjob-operator"
V24 = "D23"

ORTE_TO_PRTE = {  # ORTE name -> (PRTE name, value of the PRTE one given the ORTE value)
    "OMPI_MCA_orte_default_hostfile": ("PRTE_MCA_prte_default_hostfile", None),
    "OMPI_MCA_orte_keep_fqdn_hostnames": ("PRTE_MCA_prte_keep_fqdn_hostnames", "false"),
    "OMPI_MCA_orte_set_default_slots": ("PRTE_MCA_prte_set_default_slots", None),
    "OMPI_MCA_plm_rsh_args": ("PRTE_MCA_plm_ssh_args", None),
}


def load_check(corpus: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("upstream_corpus_check", corpus / "check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def v24_objects(
    objects: list[dict[str, Any]], trainjobs: list[dict[str, Any]], runtimes: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Upstream v2.3.0's objects with the v2.4 MPI delta (D23) applied."""
    mpi_runtimes = {
        (r.get("metadata") or {}).get("name")
        for r in runtimes
        if ((r.get("spec") or {}).get("mlPolicy") or {}).get("mpi") is not None
    }
    images = {
        (t.get("metadata") or {}).get("name"): ((t.get("spec") or {}).get("trainer") or {}).get("image")
        for t in trainjobs
        if ((t.get("spec") or {}).get("runtimeRef") or {}).get("name") in mpi_runtimes
    }
    out = copy.deepcopy(objects)
    for obj in out:
        if obj.get("kind") != "JobSet" or obj["metadata"]["name"] not in images:
            continue
        for rjob in (obj.get("spec") or {}).get("replicatedJobs") or []:
            if rjob.get("name") not in ("launcher", "node"):
                continue
            pod = ((rjob.get("template") or {}).get("spec") or {}).get("template", {}).get("spec") or {}
            for ctr in pod.get("containers") or []:
                if ctr.get("name") != "node":
                    continue
                if images[obj["metadata"]["name"]]:
                    ctr["image"] = images[obj["metadata"]["name"]]
                env = ctr.get("env") or []
                by_name = {e.get("name"): e for e in env}
                for orte, (prte, fixed) in ORTE_TO_PRTE.items():
                    if orte in by_name and prte not in by_name:
                        env.append({"name": prte, "value": fixed if fixed is not None else by_name[orte].get("value")})
    return out


def expected_objects(check: Any, root: Path, case: dict[str, Any]) -> list[dict[str, Any]] | None:
    if case.get("want_objects") is not None:
        return list(case["want_objects"])
    oracle = check.oracle_expectation(str(root), case)
    if oracle is None:
        return None
    return [o for t in oracle.get("trainjobs") or [] for o in (t.get("objects") or [])]


def apply_v24(check: Any, root: Path) -> list[str]:
    """Rewrite the copied corpus in place; the ids of the cases whose expectation changed."""
    changed: dict[str, list[dict[str, Any]]] = {}
    for case in check.collect(str(root)):
        if case.get("deliberate"):
            continue
        want = expected_objects(check, root, copy.deepcopy(case))
        if not want:
            continue
        trainjobs, runtimes = check.case_inputs(str(root), copy.deepcopy(case))
        new = v24_objects(want, trainjobs, runtimes)
        if new != want:
            changed[case["id"]] = new
    for path in sorted((root / "cases").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        touched = False
        for case in doc.get("cases", []):
            case_id = case.get("id", f"{path.stem}/{case.get('name')}")
            if case_id in changed:
                case["want_objects"], case["deliberate"] = changed[case_id], V24
                touched = True
        if touched:
            path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    dumped = root / "go-dumped"
    for path in sorted(dumped.rglob("*.yaml")):
        case_id = str(path.relative_to(dumped))[:-5]
        if case_id in changed:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
            doc["want_objects"], doc["deliberate"] = changed[case_id], V24
            path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return sorted(changed)


FLUX_RETIRED = "D3"  # "no Flux plugin": retired, Flux is built as upstream builds it
FLUX_SCRIPTS = "D12"  # Flux's two scripts are our own text (the rest of what Flux builds is upstream's)


def retire_no_flux(root: Path) -> list[str]:
    """The corpus was written while this project had no Flux plugin (D3). Flux is now built as upstream builds it,
    so a case that expected Flux to be ignored takes upstream's verdict again: one whose only expectation was that
    verdict (`expect`) drops it for the oracle's, the others keep their checks under D12 (our scripts' text)."""
    retired = []
    for path in sorted((root / "cases").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        touched = False
        for case in doc.get("cases", []):
            if case.get("deliberate") != FLUX_RETIRED:
                continue
            if "expect" in case and not case.get("checks") and "want_objects" not in case:
                case.pop("expect")
                case.pop("deliberate")
            else:
                case["deliberate"] = FLUX_SCRIPTS
            retired.append(case.get("id", f"{path.stem}/{case.get('name')}"))
            touched = True
        if touched:
            path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return retired


UNBUILDABLE = "D28"  # refused at admission: what the API cannot hold once built (a TrainJob name too long for its pods)
POD_NAME_LIMIT = 63  # a pod's hostname label
POD_NAME_SUFFIX = len("-0-0-abcde")  # JobSet's shortest: -<job index>-<pod index>-<5 random characters>


def refuse_unbuildable_names(check: Any, root: Path) -> list[str]:
    """Upstream admits a TrainJob whose name leaves no room for the pod names JobSet makes from it
    (`<name>-<replicatedJob>-<job index>-<pod index>-<5>`, at most 63 characters); JobSet's webhook then refuses its
    JobSet and it never runs. This operator refuses it at admission, naming metadata.name (D28). A case that expects
    such a TrainJob valid expects it invalid instead, computed from the names alone (the shortest indexes)."""
    refused = set()
    for case in check.collect(str(root)):
        if case.get("expect", "valid") != "valid" or case.get("deliberate"):
            continue
        trainjobs, runtimes = check.case_inputs(str(root), copy.deepcopy(case))
        jobs = {
            (rt.get("metadata") or {}).get("name"): [
                rj.get("name") or ""
                for rj in (((rt.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or []
            ]
            for rt in runtimes
        }
        if any(
            len((tj.get("metadata") or {}).get("name") or "") + 1 + len(rjob) + POD_NAME_SUFFIX > POD_NAME_LIMIT
            for tj in trainjobs
            for rjob in jobs.get(((tj.get("spec") or {}).get("runtimeRef") or {}).get("name"), [])
        ):
            refused.add(case["id"])
    for path in sorted((root / "cases").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        touched = False
        for case in doc.get("cases", []):
            if case.get("id", f"{path.stem}/{case.get('name')}") in refused:
                case["expect"], case["deliberate"] = "invalid", UNBUILDABLE
                case.pop("want_objects", None)
                touched = True
        if touched:
            path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return sorted(refused)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("cli", nargs="?", default=str(DEFAULT_CLI), help="the trainjob-operator executable")
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("-v", action="store_true", help="list passing cases too")
    parser.add_argument("-k", help="only cases whose id contains this")
    args = parser.parse_args(argv)
    corpus = Path(args.corpus)
    if not (corpus / "check.py").is_file():
        print(f"upstream corpus not found at {corpus} (set TRAINJOB_UPSTREAM_CORPUS)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="upstream-corpus-") as tmp:
        root = Path(tmp) / "corpus"
        shutil.copytree(corpus, root)
        for path in root.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        retired = retire_no_flux(root)
        print(
            f"Flux is built ({FLUX_RETIRED} retired): {len(retired)} case(s) take upstream's verdict or "
            f"{FLUX_SCRIPTS}: {', '.join(retired)}",
            flush=True,
        )
        refused = refuse_unbuildable_names(load_check(root), root)
        print(
            f"names too long for JobSet's pods ({UNBUILDABLE}) refused in {len(refused)} case(s): {', '.join(refused)}",
            flush=True,
        )
        changed = apply_v24(load_check(root), root)
        print(
            f"v2.4 delta ({V24}, docs/compatibility.md) applied to {len(changed)} case(s): {', '.join(changed)}",
            flush=True,
        )
        cli = Path(tmp) / "trainjob-operator"  # the CLI as the oracle's client: unknown fields pruned, with a warning
        cli.write_text(f'#!/bin/sh\nexec {shlex.quote(str(Path(args.cli).resolve()))} "$@" --validate=warn\n')
        cli.chmod(0o755)
        cmd = [sys.executable, str(root / "check.py"), str(cli), str(root)]
        cmd += ["-v"] if args.v else []
        cmd += ["-k", args.k] if args.k else []
        return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
