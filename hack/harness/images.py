"""Container images for the real nodes, built on this machine without a registry or a daemon (issue 23).

Each image is a root filesystem assembled from Debian packages already installed here (or fetched by mmdebstrap),
committed with Debian's buildah (vfs storage, chroot isolation, fixed timestamp) and written as an OCI archive to
the tool cache::

    ${XDG_CACHE_HOME:-~/.cache}/trainjob-operator/images/<name>-<key>.oci.tar   (+ .json: reference, digest, size)

``<key>`` hashes the recipe (this file's ``RECIPES`` entry and ``IMAGES_VERSION``) and the versions of the Debian
packages it copies, so a warm cache is a no-op and the reference (``localhost/trainjob-dev/<name>:<key>``) changes
whenever the content would. Nodes import the archives into their containerd (``ctr images import``).

| image | content | use |
|---|---|---|
| pause | static busybox (Debian ``busybox-static``), ``sleep infinity`` | containerd's sandbox image |
| busybox | static busybox with its applets as links, /etc/passwd | test pods (sh, nslookup, nc, wget) |
| torch | Debian bookworm ``essential`` + ``python3-torch`` (1.13.1, CPU-only, gloo) by mmdebstrap | torchrun |
| sdk | Debian bookworm ``essential`` + ``python3``, the kubeflow SDK and its dependencies from the project's lock | progress from a pod |
| sdk-trixie | Debian trixie ``essential`` + ``python3`` (3.13: strict X.509 verification by default), the kubeflow SDK from ``requirements/images/sdk-trixie.txt`` | progress from a pod on Python 3.13 |
| torch-sdk | the torch image + the kubeflow SDK and its dependencies from the project's lock | torch reporting progress, a hang (issue 35) |
| jax | Debian bookworm ``essential`` + ``python3``, ``jax``/``jaxlib`` (CPU) wheels from ``requirements/images/jax.txt`` | jax-distributed |
| xgboost | Debian bookworm ``essential`` + ``python3-xgboost`` (1.7.4, CPU) | xgboost-distributed |
| tensorflow | Debian bookworm ``essential`` + ``python3``, ``tensorflow-cpu`` wheels from ``requirements/images/tensorflow.txt`` | tensorflow-distributed |
| dataset-initializer, model-initializer | static busybox + ``INITIALIZE`` (copies ``STORAGE_URI`` from a local source) | initializers |
| mpi | Debian bookworm ``essential`` + ``openmpi-bin`` (4.1.4), ``openssh-server``/``-client``, ``python3-mpi4py``; user ``mpiuser`` (uid 1000) with mpi-operator's non-root sshd settings | the MPI runtimes' launcher and nodes |

Why Debian's ``python3-torch`` and not PyPI's wheel: PyPI's Linux ``torch`` is the CUDA build and depends on the
``nvidia-*`` wheels (several GB); the CPU-only wheels live on download.pytorch.org, not PyPI. Debian's build is
CPU-only and comes with gloo. Documentation, man pages and locales are left out (``path-exclude``).

A recipe's ``pip`` installs wheels from PyPI: the entries of its ``lock`` (``requirements/lock.txt``, or an
image's own lock under ``requirements/images/``, ``make lock-images``) its ``roots`` need (their closure by the
lock's ``# via`` lines), with the lock's hashes (``--require-hashes``, wheels only, for the image's Python, not the
host's), into ``/usr/local/lib/python3.X/dist-packages``, then removes its ``prune`` paths there (TensorFlow's C++
headers); that requirements text is part of the key. The host's pip runs it, so it trusts what this machine trusts
(an egress proxy's CA) without copying the
host's CA bundle into the image.

A recipe's ``files`` are written into the root filesystem and its ``hooks`` run inside it (``chroot``) after the
packages are installed (mmdebstrap's customize hooks): the settings an image needs live in the image, never in the
operator. Why the MPI image is set up as it is:

- Open MPI 4.1 (bookworm; trixie's 5.x reads PRRTE's names, not the ``OMPI_MCA_orte_*`` the operator injects).
- ``ssh`` and ``sshd`` on port 2222, as upstream's runtimes probe (``readinessProbe.tcpSocket.port: 2222``); the
  client skips host-key checks and writes no known_hosts (the key directory is a read-only Secret volume).
- Non-root sshd (the deepspeed/mlx/horovod shape: ``sshd -De -f /home/mpiuser/.sshd_config`` as uid 1000): its pid
  file in the home, the operator's key Secret (``id_rsa``) as host key, ``StrictModes no`` (the Secret's files
  are root-owned). A root sshd (``sshAuthMountPath: /root/.ssh``) gets the same from ``/etc/ssh/sshd_config.d``.
- No host keys baked into the image (the package's postinst made some): every pod uses the operator's key.
- ``mpiuser``'s password is ``*`` (no password login), not ``!``: a root sshd reads the shadow file and refuses
  a locked account even for key logins.
- Open MPI over TCP only (``pml ob1``, ``btl tcp,vader,self``, no single-copy, no binding): a container has no
  InfiniBand, its ptrace and CPU binding are not ours to ask for.

The Debian images are keyed by their recipe only (the mirror moves with point releases); their digest is in the
metadata file, and ``SOURCE_DATE_EPOCH=0`` makes mmdebstrap's output independent of the build time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

IMAGES_VERSION = "1"
REPO = Path(__file__).resolve().parents[2]
REPOSITORY = "localhost/trainjob-dev"

PASSWD = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
GROUP = "root:x:0:\nnogroup:x:65534:\n"

DEBIAN_MIRROR = "http://deb.debian.org/debian"
#: Left out of Debian root filesystems: nothing in a training pod reads them.
DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")

#: The initializer images' program: "downloads" $STORAGE_URI into /workspace/<dataset|model> (where upstream's
#: initializers write) from a local source, never the network: `scheme://path` is the directory
#: `${INITIALIZER_SOURCE:-/source}/scheme/path` (a volume the runtime mounts: a ConfigMap in tests/realnode and the
#: demo). What it copied goes to the log, the line the tests and the demo read.
INITIALIZE = r"""set -eu
kind=$1
uri=${STORAGE_URI:?STORAGE_URI is not set}
case $uri in *://*) ;; *) echo "initializer: STORAGE_URI $uri is not scheme://path" >&2; exit 2 ;; esac
src=${INITIALIZER_SOURCE:-/source}/${uri%%://*}/${uri#*://}
dest=${INITIALIZER_DEST:-/workspace/$kind}
if [ ! -d "$src" ]; then echo "initializer: $uri is not in the local source ($src)" >&2; exit 1; fi
mkdir -p "$dest"
cp -RL "$src/." "$dest/"
echo "initializer: $kind $uri -> $dest files=$(find "$dest" -type f | wc -l) bytes=$(cat $(find "$dest" -type f) | wc -c)"
"""

#: name -> how its root filesystem is made ("busybox": from the installed busybox-static; "debian": mmdebstrap of
#: `suite` with `include`), the installed Debian packages it copies (part of the key), entrypoint and cmd.
RECIPES: dict[str, dict[str, Any]] = {
    "pause": {
        "rootfs": "busybox",
        "packages": ["busybox-static"],
        "entrypoint": ["/bin/busybox", "sleep", "infinity"],
        "cmd": [],
    },
    "busybox": {"rootfs": "busybox", "packages": ["busybox-static"], "entrypoint": [], "cmd": ["/bin/sh"]},
    "python": {
        "rootfs": "debian",
        "variant": "minbase",
        "suite": "bookworm",
        "include": ["python3", "python3-venv", "python3-pip", "python-is-python3"],
        "packages": ["mmdebstrap"],
        "entrypoint": [],
        "cmd": ["python3"],
    },
    "torch": {
        "rootfs": "debian",
        "suite": "bookworm",
        "include": ["python3-torch"],
        "packages": ["mmdebstrap"],
        "entrypoint": [],
        "cmd": ["python3"],
    },
    "sdk": {
        "rootfs": "debian",
        "suite": "bookworm",
        "include": ["python3"],
        "packages": ["mmdebstrap"],
        "pip": {"lock": "requirements/lock.txt", "roots": ["kubeflow"], "python": "3.11"},
        "entrypoint": [],
        "cmd": ["python3"],
    },
    # Python 3.13's ssl.create_default_context() (and urllib3 2 on it) sets VERIFY_X509_STRICT: the SDK's progress call
    # from this image is what proves the status server's certificate passes strict verification (issue 33).
    "sdk-trixie": {
        "rootfs": "debian",
        "suite": "trixie",
        "include": ["python3"],
        "packages": ["mmdebstrap"],
        "pip": {"lock": "requirements/images/sdk-trixie.txt", "roots": ["kubeflow"], "python": "3.13"},
        "entrypoint": [],
        "cmd": ["python3"],
    },
    "torch-sdk": {
        "rootfs": "debian",
        "suite": "bookworm",
        "include": ["python3-torch"],
        "packages": ["mmdebstrap"],
        "pip": {"lock": "requirements/lock.txt", "roots": ["kubeflow"], "python": "3.11"},
        "entrypoint": [],
        "cmd": ["python3"],
    },
    "mpi": {
        "rootfs": "debian",
        "suite": "bookworm",
        "include": ["openmpi-bin", "openssh-server", "openssh-client", "python3-mpi4py"],
        "packages": ["mmdebstrap"],
        "files": {
            "/etc/ssh/ssh_config.d/mpi.conf": (
                "Host *\n    Port 2222\n    StrictHostKeyChecking no\n    UserKnownHostsFile /dev/null\n"
                "    LogLevel ERROR\n"
            ),
            "/etc/ssh/sshd_config.d/mpi.conf": "Port 2222\nHostKey /root/.ssh/id_rsa\nStrictModes no\n",
            "/home/mpiuser/.sshd_config": (
                "Port 2222\nPidFile /home/mpiuser/sshd.pid\nHostKey /home/mpiuser/.ssh/id_rsa\nStrictModes no\n"
            ),
            "/etc/openmpi/openmpi-mca-params.conf": (
                "pml = ob1\nbtl = tcp,vader,self\nbtl_vader_single_copy_mechanism = none\n"
                "hwloc_base_binding_policy = none\n"
            ),
        },
        # /run kept (mmdebstrap empties it otherwise): a root sshd needs its privilege separation directory.
        "skip": ["cleanup/run"],
        "hooks": [
            "rm -f /etc/ssh/ssh_host_*",
            "find /run -mindepth 1 -maxdepth 1 ! -name lock -exec rm -rf {} +",
            "mkdir -p -m 0755 /run/sshd",
            "useradd --uid 1000 --user-group --no-create-home --home-dir /home/mpiuser --shell /bin/bash mpiuser",
            "usermod --password '*' mpiuser",
            "chown -R mpiuser:mpiuser /home/mpiuser",
        ],
        "entrypoint": [],
        "cmd": ["/bin/bash"],
    },
    "jax": {
        "rootfs": "debian",
        "suite": "bookworm",
        "include": ["python3", "libstdc++6"],
        "packages": ["mmdebstrap"],
        "pip": {"lock": "requirements/images/jax.txt", "roots": ["jax", "jaxlib"], "python": "3.11"},
        "entrypoint": [],
        "cmd": ["python3"],
    },
    "xgboost": {
        "rootfs": "debian",
        "suite": "bookworm",
        "include": ["python3-xgboost"],
        "packages": ["mmdebstrap"],
        "entrypoint": [],
        "cmd": ["python3"],
    },
    "tensorflow": {
        "rootfs": "debian",
        "suite": "bookworm",
        "include": ["python3", "libstdc++6"],
        "packages": ["mmdebstrap"],
        # C++ headers for building custom ops (287 MB of 1.6 GB): nothing in a training pod compiles against them.
        "pip": {
            "lock": "requirements/images/tensorflow.txt",
            "roots": ["tensorflow-cpu"],
            "python": "3.11",
            "prune": ["tensorflow/include"],
        },
        "entrypoint": [],
        "cmd": ["python3"],
    },
    "dataset-initializer": {
        "rootfs": "busybox",
        "packages": ["busybox-static"],
        "files": {"/usr/local/bin/initialize": INITIALIZE},
        "entrypoint": ["/bin/sh", "/usr/local/bin/initialize", "dataset"],
        "cmd": [],
    },
    "model-initializer": {
        "rootfs": "busybox",
        "packages": ["busybox-static"],
        "files": {"/usr/local/bin/initialize": INITIALIZE},
        "entrypoint": ["/bin/sh", "/usr/local/bin/initialize", "model"],
        "cmd": [],
    },
}


class ImageError(RuntimeError):
    """An image could not be built."""


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trainjob-operator" / "images"


def _deb_version(package: str) -> str:
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0 or not proc.stdout:
        raise ImageError(f"Debian package {package} is not installed: run `make tools-nodes-debs`")
    return proc.stdout


#: Where wheels for the image's Python may come from (bookworm's glibc is 2.36): pip takes `--platform` tags
#: literally, so every manylinux glibc level up to bookworm's is listed (jaxlib publishes manylinux_2_27 only).
WHEEL_PLATFORMS = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(36, 16, -1)),
    "manylinux2014_x86_64",
    "linux_x86_64",
)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_subset(lock: str, roots: list[str]) -> str:
    """The entries of a `uv pip compile` lock (`lock`'s text) that `roots` need: the roots and, transitively, every
    entry whose `# via` names one already needed. Each entry keeps its pin, marker and hashes."""
    entries: dict[str, list[str]] = {}
    needed_by: dict[str, set[str]] = {}
    current: str | None = None
    for line in lock.splitlines():
        stripped = line.strip()
        if line and not line[0].isspace() and not line.startswith("#"):
            current = _canonical(re.split(r"[=<>!~;\s\[]", line, maxsplit=1)[0])
            entries[current], needed_by[current] = [line], set()
        elif current is not None and stripped.startswith("--hash"):
            entries[current].append(line)
        elif current is not None and stripped.startswith("#"):
            via = stripped.lstrip("#").strip()
            via = via.removeprefix("via").strip()
            if via:
                needed_by[current].add(_canonical(via.split(" (")[0]))
    missing = [r for r in roots if _canonical(r) not in entries]
    if missing:
        raise ImageError(f"not in the lock: {', '.join(missing)}")
    needed = {_canonical(r) for r in roots}
    grew = True
    while grew:
        more = {name for name, parents in needed_by.items() if name not in needed and parents & needed}
        needed |= more
        grew = bool(more)
    return "".join("\n".join(entries[name]) + "\n" for name in sorted(needed))


def _pip_requirements(recipe: dict[str, Any]) -> str:
    pip = recipe["pip"]
    return lock_subset((REPO / pip["lock"]).read_text(), pip["roots"])


def key(name: str) -> str:
    recipe = RECIPES[name]
    h = hashlib.sha256()
    h.update(json.dumps({"v": IMAGES_VERSION, "name": name, "recipe": recipe}, sort_keys=True).encode())
    for pkg in recipe["packages"]:
        h.update(f"{pkg}={_deb_version(pkg)}".encode())
    if "pip" in recipe:
        h.update(_pip_requirements(recipe).encode())
    return h.hexdigest()[:12]


def ref(name: str) -> str:
    return f"{REPOSITORY}/{name}:{key(name)}"


def archive(name: str) -> Path:
    return cache_dir() / f"{name}-{key(name)}.oci.tar"


def metadata(name: str) -> dict[str, Any]:
    """{ref, digest, size} of a built image (ImageError when it is not built)."""
    path = archive(name).with_suffix(".json")
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        raise ImageError(f"image {name} is not built ({path})") from exc


@contextlib.contextmanager
def _lock(name: str) -> Iterator[None]:
    """One build of an image at a time (parallel sessions); other images are not held up."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f".lock-{name}", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _buildah(*args: str, timeout: float = 600) -> str:
    store = cache_dir() / "buildah"
    policy = store / "policy.json"
    if not policy.exists():
        store.mkdir(parents=True, exist_ok=True)
        # Only local content is ever committed and written to archives: nothing is pulled.
        policy.write_text(json.dumps({"default": [{"type": "insecureAcceptAnything"}]}))
    base = [
        "buildah",
        "--storage-driver",
        "vfs",
        "--root",
        str(store / "root"),
        "--runroot",
        str(store / "runroot"),
    ]
    # --signature-policy is a flag of the subcommands that read images.
    sub, rest = args[0], list(args[1:])
    if sub in ("from", "push", "commit", "bud"):
        rest = ["--signature-policy", str(policy), *rest]
    proc = subprocess.run(
        [*base, sub, *rest],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "BUILDAH_ISOLATION": "chroot"},
    )
    if proc.returncode != 0:
        raise ImageError(f"buildah {sub} failed: {proc.stderr.strip()[-2000:]}")
    return proc.stdout.strip()


def _busybox_rootfs(root: Path, recipe: dict[str, Any]) -> None:
    busybox = Path("/bin/busybox")
    (root / "bin").mkdir(parents=True)
    shutil.copy2(busybox, root / "bin" / "busybox")
    applets = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        if applet != "busybox":
            (root / "bin" / applet).symlink_to("busybox")
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text(PASSWD)
    (root / "etc" / "group").write_text(GROUP)
    (root / "tmp").mkdir(mode=0o1777)
    (root / "tmp").chmod(0o1777)
    for path, content in (recipe.get("files") or {}).items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)


def _debian_rootfs(recipe: dict[str, Any], tmp: Path) -> Path:
    """A Debian root filesystem as a tar archive, by mmdebstrap (apt from the Debian mirror, nothing else)."""
    out = tmp / "rootfs.tar"
    variant = recipe.get("variant", "essential")
    args = ["nice", "-n", "10", "mmdebstrap", f"--variant={variant}", "--include=" + ",".join(recipe["include"])]
    args += [f"--dpkgopt=path-exclude={p}" for p in DPKG_EXCLUDES]
    args += ['--aptopt=Acquire::Languages "none"', '--aptopt=APT::Install-Recommends "false"']
    stage = tmp / "files"
    for path, content in (recipe.get("files") or {}).items():
        target = stage / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        target.chmod(0o644)
    if "pip" in recipe:
        _pip_install(recipe, tmp, stage)
    if stage.exists():
        args.append(f"--customize-hook=sync-in {stage} /")
    args += [f"--skip={what}" for what in recipe.get("skip") or []]
    args += [f'--customize-hook=chroot "$1" sh -ec {shlex.quote(hook)}' for hook in recipe.get("hooks") or []]
    args += [recipe["suite"], str(out), DEBIAN_MIRROR]
    proc = subprocess.run(
        args, capture_output=True, text=True, timeout=3600, check=False, env={**os.environ, "SOURCE_DATE_EPOCH": "0"}
    )
    if proc.returncode != 0:
        raise ImageError(f"mmdebstrap failed: {proc.stderr.strip()[-2000:]}")
    return out


def _pip_install(recipe: dict[str, Any], tmp: Path, stage: Path) -> None:
    """The recipe's wheels, hash-checked, unpacked under `stage` where the image's Python finds them."""
    python = recipe["pip"]["python"]
    requirements = tmp / "requirements.txt"
    requirements.write_text(_pip_requirements(recipe))
    target = stage / "usr" / "local" / "lib" / f"python{python}" / "dist-packages"
    args = ["nice", "-n", "10", sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    args += ["--no-cache-dir", "--require-hashes", "--no-deps", "--only-binary=:all:", "--no-compile"]
    args += ["--implementation", "cp", "--python-version", python, "--abi", "cp" + python.replace(".", "")]
    args += [f"--platform={p}" for p in WHEEL_PLATFORMS]
    args += ["--target", str(target), "-r", str(requirements)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1800, check=False)
    if proc.returncode != 0:
        raise ImageError(f"pip install for the image failed: {proc.stderr.strip()[-2000:]}")
    for path in recipe["pip"].get("prune") or []:
        shutil.rmtree(target / path)


def build(name: str) -> dict[str, Any]:
    """Build `name` into the cache unless it is there; return its metadata."""
    with _lock(name):
        out = archive(name)
        meta_path = out.with_suffix(".json")
        if out.exists() and meta_path.exists():
            used(out)
            return metadata(name)
        recipe = RECIPES[name]
        image_ref = ref(name)
        with tempfile.TemporaryDirectory(prefix=f"trainjob-image-{name}-") as tmp:
            root = Path(tmp) / "rootfs"
            if recipe["rootfs"] == "busybox":
                root.mkdir()
                _busybox_rootfs(root, recipe)
                source = f"{root}/"
            else:
                source = str(_debian_rootfs(recipe, Path(tmp)))
            container = _buildah("from", "scratch")
            try:
                # `add` unpacks a tar archive; `copy` would not.
                _buildah("add" if source.endswith(".tar") else "copy", container, source, "/", timeout=1800)
                cfg = ["config", "--created-by", "trainjob-dev images.py"]
                cfg += ["--entrypoint", json.dumps(recipe["entrypoint"])] if recipe["entrypoint"] else []
                cfg += ["--cmd", json.dumps(recipe["cmd"])] if recipe["cmd"] else []
                _buildah(*cfg, container)
                _buildah("commit", "--timestamp", "0", "--omit-history", container, image_ref)
            finally:
                with contextlib.suppress(ImageError):
                    _buildah("rm", container)
            tmp_archive = out.with_suffix(".tmp")
            tmp_archive.unlink(missing_ok=True)
            _buildah("push", image_ref, f"oci-archive:{tmp_archive}:{image_ref}")
            digest = _buildah("inspect", "--format", "{{.FromImageDigest}}", image_ref)
            with contextlib.suppress(ImageError):
                _buildah("rmi", image_ref)
            tmp_archive.replace(out)
        meta = {"ref": image_ref, "digest": digest, "size": out.stat().st_size}
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    prune()
    return meta


#: What the project's Dockerfile copies (its .dockerignore lets only these through), hashed into the operator
#: image's key.
HOST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
OPERATOR_INPUTS = ("Dockerfile", "pyproject.toml", "README.md", "src", "crds")


def operator_key(repo: Path) -> str:
    h = hashlib.sha256(f"{IMAGES_VERSION} python={key('python')}".encode())
    for name in OPERATOR_INPUTS:
        path = repo / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for f in files:
            if "__pycache__" in f.parts or any(part.endswith(".egg-info") for part in f.parts):
                continue
            h.update(str(f.relative_to(repo)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def build_operator(repo: Path) -> dict[str, Any]:
    """The operator image from the project's own Dockerfile (buildah bud, chroot isolation), its base the Debian
    `python` image of RECIPES passed through the Dockerfile's PYTHON_IMAGE argument as an OCI archive; pip fetches
    the operator's dependencies from PyPI inside the build."""
    base = build("python")
    k = operator_key(repo)
    out = cache_dir() / f"operator-{k}.oci.tar"
    meta_path = out.with_suffix(".json")
    with _lock("operator"):
        if out.exists() and meta_path.exists():
            used(out)
            return {**json.loads(meta_path.read_text()), "archive": str(out)}
        image_ref = f"{REPOSITORY}/operator:{k}"
        # pip inside the build trusts what this machine trusts (a TLS-inspecting egress proxy's CA, for one):
        # the host's CA bundle is mounted for the RUN steps only, never copied into the image.
        ca_mount = [f"--volume={HOST_CA_BUNDLE}:{HOST_CA_BUNDLE}:ro"] if Path(HOST_CA_BUNDLE).is_file() else []
        _buildah(
            "bud",
            *ca_mount,
            "--isolation",
            "chroot",
            "--timestamp",
            "0",
            "--build-arg",
            f"PYTHON_IMAGE=oci-archive:{archive('python')}",
            "-t",
            image_ref,
            "-f",
            str(repo / "Dockerfile"),
            str(repo),
            timeout=3600,
        )
        tmp_archive = out.with_suffix(".tmp")
        tmp_archive.unlink(missing_ok=True)
        _buildah("push", image_ref, f"oci-archive:{tmp_archive}:{image_ref}")
        digest = _buildah("inspect", "--format", "{{.FromImageDigest}}", image_ref)
        with contextlib.suppress(ImageError):
            _buildah("rmi", "--all")  # the build's intermediate images too
        tmp_archive.replace(out)
        meta = {
            "ref": image_ref,
            "digest": digest,
            "size": out.stat().st_size,
            "base": base["ref"],
        }
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    prune()
    return {**meta, "archive": str(out)}


#: How many archives of one image the cache keeps, the most recently used first: a new operator image is built for
#: every change of src/ (87 MB each), and 18 of them had piled up in a week. Others' worktrees may be a few commits
#: behind, and an archive used within `KEEP_RECENT_S` stays whatever its rank.
KEEP_PER_IMAGE = 3
KEEP_RECENT_S = 3600.0


def stale_archives(entries: list[tuple[str, float]], now: float) -> list[str]:
    """Of `entries` ((file name, last use as a timestamp) of the cache's archives), those to remove: per image name,
    all but the `KEEP_PER_IMAGE` most recently used, except those used within `KEEP_RECENT_S`."""
    by_image: dict[str, list[tuple[float, str]]] = {}
    for file_name, last_use in entries:
        match = re.fullmatch(r"(.+)-[0-9a-f]{12}\.oci\.tar", file_name)
        if match:
            by_image.setdefault(match.group(1), []).append((last_use, file_name))
    stale = []
    for archives in by_image.values():
        archives.sort(reverse=True)
        stale += [name for last_use, name in archives[KEEP_PER_IMAGE:] if now - last_use >= KEEP_RECENT_S]
    return sorted(stale)


def used(path: Path) -> None:
    """Mark an archive as used now (its mtime): `prune` keeps the most recently used."""
    with contextlib.suppress(OSError):
        os.utime(path)


def prune() -> list[str]:
    """Remove the archives `stale_archives` names, with their metadata; their names."""
    folder = cache_dir()
    if not folder.is_dir():
        return []
    entries = []
    for path in folder.glob("*.oci.tar"):
        with contextlib.suppress(OSError):
            entries.append((path.name, path.stat().st_mtime))
    stale = stale_archives(entries, time.time())
    for name in stale:
        for path in (folder / name, (folder / name).with_suffix(".json")):
            path.unlink(missing_ok=True)
    return stale


def ensure(names: list[str]) -> dict[str, str]:
    """Build what is missing; name -> reference."""
    return {name: build(name)["ref"] for name in names}


#: The images that wait longest on downloads (PyPI wheels, then the biggest Debian closures), longest first: started
#: first, their downloads overlap the rest's CPU-bound steps (unpacking, committing).
DOWNLOADS_FIRST = ("tensorflow", "torch", "jax", "mpi", "sdk", "xgboost", "python")


def downloads_first(names: list[str]) -> list[str]:
    """`names` with the longest downloads first, the rest in their order."""
    rank = {name: i for i, name in enumerate(DOWNLOADS_FIRST)}
    return sorted(names, key=lambda name: rank.get(name, len(rank)))


def build_all(names: list[str], jobs: int = 1) -> None:
    """Build `names`, `jobs` at a time (each holds its own image's lock), printing each one's metadata in order."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for name, meta in zip(names, pool.map(build, names), strict=True):
            print(json.dumps({name: meta}), flush=True)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="build training images into the tool cache")
    parser.add_argument("--jobs", type=int, default=1, help="images built side by side")
    parser.add_argument("names", nargs="*", help="images to build (default: every recipe)")
    args = parser.parse_args()
    build_all(args.names or list(RECIPES), args.jobs)
