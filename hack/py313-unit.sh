#!/usr/bin/env bash
# The unit suite (not `slow`) on Python 3.13 (`make test-unit-py313`, and lane D of `make test`): 3.13 is where ssl's default
# context turns on VERIFY_X509_STRICT, which trainer images on Debian trixie run; the other sessions run 3.11.
# The interpreter: $PY313 if set, else the first 3.13 found among `uv python find` (never downloading: uv's
# managed Pythons come from GitHub, not a package registry), python3.13 on PATH, pyenv's versions and /usr(/local)/bin.
# None found: the lane is skipped with the reason printed (exit 0), unless REQUIRE_PY313=1 (exit 1).
# The virtualenv .venv-py313 is installed from the same lock (requirements/lock.txt) and reused while it is unchanged.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
UV=${UV:-.venv/bin/uv}
VENV=${PY313_VENV:-.venv-py313}

is313() { "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' >/dev/null 2>&1; }

found=""
candidates=("${PY313:-}" "$("$UV" python find --no-python-downloads 3.13 2>/dev/null || true)" "$(command -v python3.13 || true)")
candidates+=("${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python3.13 /usr/local/bin/python3.13 /usr/bin/python3.13)
for c in "${candidates[@]}"; do
    if [ -n "$c" ] && [ -x "$c" ] && is313 "$c"; then found=$c; break; fi
done
if [ -z "$found" ]; then
    echo ">> unit tests on Python 3.13: SKIPPED: no Python 3.13 interpreter (looked at \$PY313, uv python find," \
         "python3.13 on PATH, pyenv's versions, /usr/local/bin, /usr/bin); install one (pyenv install 3.13," \
         "Debian trixie's python3.13) or set PY313=/path/to/python3.13"
    [ "${REQUIRE_PY313:-0}" = 1 ] && exit 1
    exit 0
fi

stamp="$VENV/.installed-$(sha256sum requirements/lock.txt pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -e "$stamp" ]; then
    echo ">> $VENV: Python $("$found" -c 'import platform; print(platform.python_version())') ($found), from requirements/lock.txt"
    rm -rf "$VENV"
    "$UV" venv --quiet --python "$found" "$VENV"
    "$UV" pip sync --quiet --python "$VENV/bin/python" --require-hashes requirements/lock.txt
    "$UV" pip install --quiet --python "$VENV/bin/python" --no-deps --no-build-isolation -e .
    touch "$stamp"
fi
echo ">> unit tests on Python $("$VENV/bin/python" -c 'import platform; print(platform.python_version())')"
# Not the three `slow` ones: the image's build steps (the image runs 3.11), the upstream corpus through the CLI
# and TensorFlow's loopback test run on 3.11 only; they would double the lane's time.
exec "$VENV/bin/python" -m pytest tests/unit -q -p no:cacheprovider -m "not slow" "$@"
