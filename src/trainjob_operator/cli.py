"""`trainjob-operator`: render and validate TrainJobs offline, exactly as the operator would.

This module is the command line only (flags and dispatch): `offline/` does `render`, `validate` and `convert`,
`controller/` runs the operator (`run`), `ui/` the web UI.

Exit codes: 0 success; 1 invalid input (field errors on stderr as `<field path>: <message>`);
2 unusable input (unreadable file, bad YAML, unknown kind, older API shape, missing runtime, a bad flag) with one
line naming it. `convert` rewrites older shapes (proposal-era `kubeflow.org/v2alpha1`, early v1alpha1) into the
served one.
Every file may hold TrainJobs and runtimes together (`-f` and `-r` accept every kind, as `kubectl apply -f`
does); as with kubectl, `-f`/`-r` name files, directories (their .json, .yaml and .yml files; `-R` their
subdirectories too) or `-` (stdin). A TrainJob whose runtime is missing or cannot be built is reported and the
others are still checked and rendered; the exit code is the worst seen (2 over 1 over 0). Fields the CRD schema
does not know make the object invalid, in the API server's words for kubectl's default `--validate=strict`;
`--validate=warn` prunes them as the API server does with a `Warning: unknown field` line each, `ignore` silently.
"""

import argparse
import gc
import sys
from collections.abc import Sequence

from . import flags
from .offline import forked
from .offline.inputs import PROG
from .runtime.errors import render_value

FIELD_VALIDATION = ("strict", "warn", "ignore")
"""kubectl's `--validate` values: what an unknown field does (an error, a warning, nothing); true/false are strict/ignore."""


def parser() -> argparse.ArgumentParser:
    p = flags.OneLineParser(prog=PROG, description=__doc__.splitlines()[0] if __doc__ else None)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", help="`COMMAND --help` for its flags")
    for name, help_text in (
        ("render", "print every object the operator would apply for the TrainJobs"),
        ("validate", "run CRD-level and admission validation on TrainJobs and runtimes"),
    ):
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        _file_flags(cmd, "TrainJobs (and runtimes)")
        cmd.add_argument(
            "-r",
            "--runtimes",
            action="append",
            default=[],
            metavar="FILE",
            help="TrainingRuntimes / ClusterTrainingRuntimes: a file, a directory or - (stdin); repeatable",
        )
        cmd.add_argument(
            "--validate",
            type=field_validation,
            default="strict",
            metavar="MODE",
            help="what a field the CRD does not know does, as kubectl's --validate: strict (default; the object is "
            "invalid), warn (pruned, with a warning) or ignore (pruned silently); true/false mean strict/ignore",
        )
        cmd.add_argument(
            "--workers",
            type=flags.positive_int,
            metavar="N",
            help=f"processes for a long input (at least {forked.PER_WORKER} TrainJobs each, at most {forked.MAX_WORKERS}); "
            "the default is one per usable CPU",
        )
        if name == "render":
            _output_flag(cmd, "the objects")
        else:
            cmd.add_argument(
                "--old",
                action="append",
                default=[],
                metavar="FILE",
                help="the stored TrainJobs that -f updates (matched by namespace/name): also run the "
                "update rules (immutable fields, resize while suspended); repeatable",
            )
    conv_help = (
        "rewrite proposal-era (kubeflow.org/v2alpha1) and early v1alpha1 TrainJobs and runtimes as "
        "trainer.kubeflow.org/v1alpha1; stderr lists what has no home and the runtime each TrainJob got"
    )
    conv = sub.add_parser("convert", help=conv_help, description=conv_help)
    _file_flags(conv, "objects to convert")
    conv.add_argument(
        "-r",
        "--runtimes",
        action="append",
        default=[],
        metavar="FILE",
        help="the runtimes the TrainJobs will run with: the output is validated against them (exit 1 when invalid) "
        "and a TrainJob without a runtime gets the one that suits it best (default: this project's runtimes)",
    )
    conv.add_argument(
        "--runtime",
        metavar="NAME",
        help="the runtime every converted TrainJob names (spec.runtimeRef; a TrainingRuntime of that name in the -r "
        "files, else the ClusterTrainingRuntime)",
    )
    _output_flag(conv, "the converted objects")
    sub.add_parser("run", help="run the operator (controller manager and webhooks); `run --help` for its flags")
    sub.add_parser("ui", help="a read-only web UI over TrainJobs with your kubeconfig; `ui --help` for its flags")
    sub.add_parser(
        "goodput",
        help="where the TrainJobs' time went (queued, training, stalled, ...); `goodput --help` for its flags",
    )
    return p


def _file_flags(cmd: argparse.ArgumentParser, what: str) -> None:
    cmd.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE",
        help=f"{what}: a YAML or JSON file, a directory of .json/.yaml/.yml files, or - (stdin); repeatable",
    )
    cmd.add_argument(
        "-R", "--recursive", action="store_true", help="read the directories of -f and -r with their subdirectories"
    )


def _output_flag(cmd: argparse.ArgumentParser, what: str) -> None:
    cmd.add_argument(
        "-o",
        "--output",
        choices=("yaml", "json"),
        default="yaml",
        help=f"{what} as a YAML stream (default) or as one JSON List",
    )


def field_validation(text: str) -> str:
    """kubectl's `--validate` value: strict, warn or ignore (true and false are strict and ignore)."""
    value = {"true": "strict", "false": "ignore"}.get(text.lower(), text.lower())
    if value not in FIELD_VALIDATION:
        raise argparse.ArgumentTypeError(f"{render_value(text)} is not one of strict, warn, ignore (or true, false)")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:
        # kopf's default registry probes for Kubernetes client libraries at import time and would keep ~60 MiB of
        # the `kubernetes` package in memory; the operator logs in by itself, so the probe must find none.
        probed = ("kubernetes", "kubernetes_asyncio", "pykube")
        saved = {name: sys.modules.get(name) for name in probed}
        for name in probed:
            sys.modules[name] = None  # type: ignore[assignment]  # an import of it raises ImportError
        try:
            from .controller.main import run  # imported lazily: only the operator needs kopf
        finally:
            for name, module in saved.items():
                if module is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = module
        return int(run(argv[1:]))
    if argv[:1] == ["ui"]:
        from .ui.server import run as run_ui  # imported lazily: aiohttp's server only for the UI

        return int(run_ui(argv[1:]))
    if argv[:1] == ["goodput"]:
        from .ui.goodput_table import run as run_goodput  # imported lazily: it reads the cluster

        return int(run_goodput(argv[1:]))
    args = parser().parse_args(argv)  # `--help` and a bad flag end here, before any model is built
    # Building the models at import makes many objects that all live on: the cyclic collector's passes over them
    # are 7% of the start-up, and `commands.run` keeps it off for the batch too.
    collecting = gc.isenabled()
    gc.disable()
    try:
        from .offline import commands  # imported lazily: the models, the plugins and the pipeline
        from .runtime.pipeline import Framework

        return commands.run(args, Framework.from_registry())
    finally:
        if collecting:
            gc.enable()


if __name__ == "__main__":
    sys.exit(main())
