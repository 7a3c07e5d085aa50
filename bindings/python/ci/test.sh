#!/usr/bin/env bash
# The Python package's tests the way CI runs them, with no package from PyPI:
# cargo builds the extension (a cdylib) and the driver, the extension is put
# beside the package's Python files as quiver/_quiver.abi3.so in a temporary
# directory on PYTHONPATH, and Debian's python3 with python3-numpy and
# python3-pytest runs bindings/python/tests (the driver, for the tests that
# compare with `quiver walk corpus`, comes in QUIVER_BIN).
# `pip install ./bindings/python` (maturin) builds the same module as a wheel.
set -euo pipefail
cd "$(dirname "$0")/../../.."
# Debian's interpreter, where apt put numpy and pytest (a python3 earlier on
# PATH, such as pyenv's, may have neither); PYTHON overrides.
python=${PYTHON:-/usr/bin/python3}

artifacts=$(mktemp)
site=$(mktemp -d)
trap 'rm -rf "$artifacts" "$site"' EXIT
cargo build -p quiver-python -p quiver --message-format=json-render-diagnostics >"$artifacts"
# The paths of the extension and the driver, from cargo's own report.
read -r extension driver < <("$python" -c '
import json, sys
extension = driver = None
for line in open(sys.argv[1]):
    message = json.loads(line)
    if message.get("reason") != "compiler-artifact":
        continue
    if "cdylib" in message["target"]["kind"] and message["target"]["name"] == "quiver_python":
        extension = [f for f in message["filenames"] if f.endswith(".so")][0]
    if message["target"]["kind"] == ["bin"] and message["target"]["name"] == "quiver":
        driver = message["executable"]
print(extension, driver)
' "$artifacts")
cp -r bindings/python/python/quiver "$site/"
cp "$extension" "$site/quiver/_quiver.abi3.so"
PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" QUIVER_BIN="$driver" \
  "$python" -m pytest -q -p no:cacheprovider bindings/python/tests "$@"
