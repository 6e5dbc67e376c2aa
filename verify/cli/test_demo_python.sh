#!/bin/sh
# ci/demo names the PyTorch that made the goldens with the python3 the build found (torch + h5py),
# not whatever python3 is first on PATH: with a python3 lacking them first on PATH it must still
# name the version, or say "PyTorch not available" when the build found none -- never "?".
# $FIVEFOLD is the binary; $FF_PYTHON_FOUND what CMake found (empty: none).
set -u
ff=${FIVEFOLD:?set FIVEFOLD to the fivefold binary}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#!/bin/sh\nexit 1\n' >"$tmp/python3"  # a python3 without torch or h5py
chmod +x "$tmp/python3"
out=$(PATH="$tmp:$PATH" bash "$here/../../ci/demo" "$ff" --header 2>&1)
rc=$?
echo "$out"
if [ -n "${FF_PYTHON_FOUND:-}" ]; then want='^goldens: PyTorch [0-9]'; else want='^goldens: PyTorch not available: no python3 with torch and h5py'; fi
if [ "$rc" -eq 0 ] && echo "$out" | grep -qE "$want" && ! echo "$out" | grep -q '?'; then
    echo "PASS  ci/demo header matches '$want'"
else
    echo "FAIL  ci/demo --header: exit $rc, expected a line matching '$want' and no '?'"
    exit 1
fi
