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

Why Debian's ``python3-torch`` and not PyPI's wheel: PyPI's Linux ``torch`` is the CUDA build and depends on the
``nvidia-*`` wheels (several GB); the CPU-only wheels live on download.pytorch.org, not PyPI. Debian's build is
CPU-only and comes with gloo. Documentation, man pages and locales are left out (``path-exclude``).

The Debian images are keyed by their recipe only (the mirror moves with point releases); their digest is in the
metadata file, and ``SOURCE_DATE_EPOCH=0`` makes mmdebstrap's output independent of the build time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

IMAGES_VERSION = "1"
REPOSITORY = "localhost/trainjob-dev"

PASSWD = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
GROUP = "root:x:0:\nnogroup:x:65534:\n"

DEBIAN_MIRROR = "http://deb.debian.org/debian"
#: Left out of Debian root filesystems: nothing in a training pod reads them.
DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")

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


def key(name: str) -> str:
    recipe = RECIPES[name]
    h = hashlib.sha256()
    h.update(json.dumps({"v": IMAGES_VERSION, "name": name, "recipe": recipe}, sort_keys=True).encode())
    for pkg in recipe["packages"]:
        h.update(f"{pkg}={_deb_version(pkg)}".encode())
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


def _busybox_rootfs(root: Path) -> None:
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


def _debian_rootfs(recipe: dict[str, Any], tmp: Path) -> Path:
    """A Debian root filesystem as a tar archive, by mmdebstrap (apt from the Debian mirror, nothing else)."""
    out = tmp / "rootfs.tar"
    variant = recipe.get("variant", "essential")
    args = ["nice", "-n", "10", "mmdebstrap", f"--variant={variant}", "--include=" + ",".join(recipe["include"])]
    args += [f"--dpkgopt=path-exclude={p}" for p in DPKG_EXCLUDES]
    args += ['--aptopt=Acquire::Languages "none"', '--aptopt=APT::Install-Recommends "false"']
    args += [recipe["suite"], str(out), DEBIAN_MIRROR]
    proc = subprocess.run(
        args, capture_output=True, text=True, timeout=3600, check=False, env={**os.environ, "SOURCE_DATE_EPOCH": "0"}
    )
    if proc.returncode != 0:
        raise ImageError(f"mmdebstrap failed: {proc.stderr.strip()[-2000:]}")
    return out


def build(name: str) -> dict[str, Any]:
    """Build `name` into the cache unless it is there; return its metadata."""
    with _lock(name):
        out = archive(name)
        meta_path = out.with_suffix(".json")
        if out.exists() and meta_path.exists():
            return metadata(name)
        recipe = RECIPES[name]
        image_ref = ref(name)
        with tempfile.TemporaryDirectory(prefix=f"trainjob-image-{name}-") as tmp:
            root = Path(tmp) / "rootfs"
            if recipe["rootfs"] == "busybox":
                root.mkdir()
                _busybox_rootfs(root)
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
        return {**meta, "archive": str(out)}


def ensure(names: list[str]) -> dict[str, str]:
    """Build what is missing; name -> reference."""
    return {name: build(name)["ref"] for name in names}


if __name__ == "__main__":
    import sys

    for n in sys.argv[1:] or list(RECIPES):
        print(json.dumps({n: build(n)}))
