"""Build the real nodes' parts and images in the background while `make test`'s tools compile and lanes run.

Cold, the node parts take about 10 minutes and the images about 15 (docs/harness.md, "Real nodes"); session 4
(tests/realnode) needs both. `make test` calls `start` first and lane A calls `wait` before session 4, so the
build overlaps the tools' compile and the other lanes, which need no real node. The build runs at nice 10 in a
session of its own and writes everything to `<dir>/build.log`; its exit status goes to `<dir>/rc`.

    python hack/harness/realnode_prebuild.py start   # returns at once
    python hack/harness/realnode_prebuild.py wait    # returns when the build is over; exit 1, with the
                                                          # log's last lines, when it failed

Where the machine cannot run real nodes (not root, no overlay filesystem, the Debian tools missing) `start` builds
nothing and says why; `wait` then returns at once and the real-node tests skip with the same reason.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import cluster, realnodes

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "trainjob-operator-realnode-prebuild"
# Cold node parts (~10 min) and images (~15 min) on 2 loaded cores, with room: past this `wait` gives up.
DEFAULT_TIMEOUT_S = 3600.0
POLL_S = 2.0
TAIL_LINES = 40


#: The images session 4 (every test in tests/realnode) runs, the ones that wait longest on the network first (PyPI
#: wheels, then the biggest Debian closures), so the two build streams overlap downloads with the CPU-bound steps.
SESSION_IMAGES = (
    "tensorflow",
    "torch",
    "jax",
    "mpi",
    "sdk",
    "sdk-trixie",
    "xgboost",
    "python",
    "busybox",
    "pause",
    "dataset-initializer",
    "model-initializer",
)
#: Image builds side by side: each mostly waits on downloads (Debian packages, wheels), so two fit on 2 cores.
IMAGE_JOBS = 2


def build_command(python: str, images: tuple[str, ...] = SESSION_IMAGES, images_only: bool = False) -> str:
    """The background build: the images (session 4's by default) and, beside them, the node parts outside the
    control plane's module (containerd, runc, CNI, CoreDNS), then, unless `images_only` (the demo, whose foreground
    builds the rest), the control plane's binaries, kubelet and kube-proxy and the operator image.

    The images mostly wait on downloads; the node parts are CPU-bound, at nice 10, so they take the CPU the
    foreground's compile leaves idle. The control plane before kubelet and kube-proxy: they share its module and
    most of its packages, and two `go build`s compiling the same packages at the same time both compile them (the
    Go cache dedupes only finished work). `build.sh` takes the tool cache's lock, so when the foreground's build
    holds it this step waits and then finds the core built. The status is the images' unless they passed."""
    py = shlex.quote(python)
    image_step = f"{py} hack/harness/images.py --jobs {IMAGE_JOBS} {' '.join(images)}"
    nodes = ["bash hack/harness/tools/build-nodes.sh --without-kubelet" + (" || true" if images_only else "")]
    if not images_only:
        nodes += [
            "bash hack/harness/tools/build.sh",
            "make --no-print-directory tools-nodes",
            f"{py} -c 'from pathlib import Path; from harness import images; images.build_operator(Path.cwd())'",
        ]
    return f"{{ {' && '.join(nodes)}; }} & pid=$!; {image_step}; rc=$?; wait $pid; n=$?; exit $((rc ? rc : n))"


def start(state: Path, python: str, images: tuple[str, ...] = SESSION_IMAGES, images_only: bool = False) -> int:
    state.mkdir(parents=True, exist_ok=True)
    for name in ("rc", "skipped"):
        (state / name).unlink(missing_ok=True)
    try:
        realnodes.check_machine()
    except cluster.ClusterError as exc:
        (state / "skipped").write_text(str(exc) + "\n")
        print(f">> real-node build not started: {exc}")
        return 0
    log = state / "build.log"
    rc = shlex.quote(str(state / "rc"))
    script = f"( {build_command(python, images, images_only)} ); echo $? > {rc}.tmp && mv {rc}.tmp {rc}"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["nice", "-n", "10", "bash", "-c", script],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(REPO / "hack")},
        )
    (state / "pid").write_text(f"{proc.pid}\n")
    (state / "started").write_text(f"{time.time()}\n")
    what = "images" if images_only else "real-node parts and images"
    print(f">> {what} building in the background (pid {proc.pid}, log {log})")
    return 0


def wait(state: Path, timeout_s: float) -> int:
    if (state / "skipped").exists():
        print(f">> no real-node build to wait for: {(state / 'skipped').read_text().strip()}")
        return 0
    if not (state / "pid").exists():
        print(f"real-node build: never started (no {state / 'pid'}); run `start` first", file=sys.stderr)
        return 1
    began = time.monotonic()
    deadline = began + timeout_s
    while not (state / "rc").exists():
        if time.monotonic() > deadline:
            print(f"real-node build: not over after {timeout_s:.0f} s; log {state / 'build.log'}", file=sys.stderr)
            return 1
        time.sleep(POLL_S)
    waited = time.monotonic() - began
    status = (state / "rc").read_text().strip()
    # From the start to when the build wrote its exit code (not to now: `wait` may come long after the build ended).
    total = (state / "rc").stat().st_mtime - float((state / "started").read_text())
    if status != "0":
        tail = (state / "build.log").read_text(errors="replace").splitlines()[-TAIL_LINES:]
        print(f"real-node build FAILED (exit {status}); last lines of {state / 'build.log'}:", file=sys.stderr)
        print("\n".join(tail), file=sys.stderr)
        return 1
    print(f">> real-node parts and images ready: built in {total:.0f} s, waited {waited:.0f} s for them")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("action", choices=["start", "wait"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="state and log directory")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="wait: seconds before giving up")
    parser.add_argument("--demo", action="store_true", help="start: only the images `make demo`'s examples need")
    args = parser.parse_args(argv)
    if args.action == "start" and args.demo:
        from harness import demo

        return start(args.dir, sys.executable, tuple(demo.images_needed()), images_only=True)
    if args.action == "start":
        return start(args.dir, sys.executable)
    return wait(args.dir, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
