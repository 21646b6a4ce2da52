"""The offline commands end to end (`render`, `validate`, `convert`): exit codes and what goes to stdout and stderr."""

import argparse
import gc
import sys
from typing import NoReturn

from ..api.legacy import SHIPPED_RUNTIMES, RuntimeChoice
from ..runtime.errors import describe, printable
from ..runtime.pipeline import Framework
from . import forked
from .check import check
from .inputs import PROG, STDIN, UsageError, expand_paths, forget_stdin, load_documents, read_inputs
from .outcome import dump, outcome, report, write_objects
from .workers import in_workers


def fail(message: str, code: int) -> NoReturn:
    print(printable(f"{PROG}: error: {message}"), file=sys.stderr)
    raise SystemExit(code)


def _convert(args: argparse.Namespace, framework: Framework) -> int:
    """`convert`: the objects on stdout, what became of each on stderr; with -r, the TrainJobs checked as `validate`
    would, the output written all the same (exit 1 when invalid, for the user to fix)."""
    from .convert import check_converted, convert_files  # imported lazily: only `convert` reads older shapes

    trainjob_files = expand_paths(args.filename, args.recursive)
    runtime_files = expand_paths(args.runtimes, args.recursive)
    if (trainjob_files + runtime_files).count(STDIN) > 1:
        raise UsageError("- (stdin) is given more than once; it can be read only once")
    choices = [
        choice
        for path in runtime_files
        for doc in load_documents(path)
        if (choice := RuntimeChoice.of(doc.raw)) is not None
    ]
    done = convert_files(trainjob_files, args.runtime, choices or SHIPPED_RUNTIMES, bool(runtime_files))
    for line in done.lines:
        print(printable(line), file=sys.stderr)
    code = done.exit_code
    if runtime_files and code == 0:
        said, hints = check_converted(done, runtime_files, framework)
        report(said, sys.stderr)
        for hint in hints:
            print(printable(hint), file=sys.stderr)
        code = said.exit_code
    dump([doc.raw for doc in done.docs], args.output, sys.stdout)
    return code


def run(args: argparse.Namespace, framework: Framework) -> int:
    """`render`, `validate` or `convert`, as `args` (the command line's) say, with `framework`'s plugins and runtime
    models (`cli.py` builds it from the registry)."""
    forget_stdin()
    # A batch whose memory the input bounds: the cyclic collector would only walk the ever-growing heap of documents
    # and objects over and over (7% of `render`'s CPU for 2,000 TrainJobs); reference counting frees the rest.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _run(args, framework)
    finally:
        if collecting:
            gc.enable()


def _run(args: argparse.Namespace, framework: Framework) -> int:
    if args.command == "convert":
        try:
            return _convert(args, framework)
        except UsageError as err:
            fail(str(err), 2)
        except BrokenPipeError:
            sys.stderr.close()
        return 0
    workers = forked.workers(args.workers)
    output = args.output if args.command == "render" else None
    try:
        files = (
            expand_paths(args.filename, args.recursive),
            expand_paths(args.runtimes, args.recursive),
            expand_paths(getattr(args, "old", []), args.recursive),
        )
        if sum(paths.count(STDIN) for paths in files) > 1:
            raise UsageError("- (stdin) is given more than once; it can be read only once")
        said = in_workers(*files, framework, output, workers, args.validate) if workers > 1 else None
        if said is None:
            said = outcome(check(read_inputs(*files), framework, args.validate), framework, output)
        report(said, sys.stderr)
        if output is None:
            if said.exit_code == 0:
                print(f"valid: {said.trainjobs} TrainJob(s), {said.runtimes} runtime(s)", file=sys.stderr)
            return said.exit_code
        sys.stderr.write(said.built)
        if said.objects or said.exit_code == 0:
            write_objects(said, output, sys.stdout)
        return said.exit_code
    except UsageError as err:
        fail(str(err), 2)
    except RecursionError as err:
        fail(f"the input nests too deeply: {describe(err)}", 2)
    except BrokenPipeError:  # `render ... | head` closed the pipe: not an error of ours
        sys.stderr.close()
        return 0
