#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine, then runs lint, types and tests.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[test,spark,docs]'

# kcat is one of the independent clients the interop tests use (Debian package).
if ! command -v kcat >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        (apt-get update -qq && apt-get install -y -qq kcat) >/dev/null
    else
        echo "kcat is missing: install it (apt-get install kcat) to run the kcat interop tests" >&2
    fi
fi

echo "== ruff"
lint_dirs=()
for d in src tests tools bench examples; do [ -d "$d" ] && lint_dirs+=("$d"); done
"$VENV/bin/python" -m ruff check "${lint_dirs[@]}"
echo "== mypy --strict src/"
"$VENV/bin/python" -m mypy
echo "== docs: mkdocs build --strict"
NO_MKDOCS_2_WARNING=1 "$VENV/bin/python" -m mkdocs build --strict --quiet
echo "== pytest"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
