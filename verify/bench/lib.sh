# Shared by the bench test scripts (sourced): a scratch folder removed on exit, and PASS/FAIL
# counting. A check writes the command's output to "$tmp/out" so that bad() can show it.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS  $*"; }
bad() { fail=$((fail + 1)); echo "FAIL  $*"; sed 's/^/      /' "$tmp/out"; }
