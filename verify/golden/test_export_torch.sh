#!/bin/sh
# golden/export_torch.py end to end: a random mnist-cnn state_dict (PyTorch's MNIST-example key
# names, and an nn.Sequential with positional keys) + an input batch -> golden + weights file;
# fivefold verify --trust passes on it, fivefold infer --weights reproduces verify's output digest,
# and a state_dict of the wrong shape is refused.
set -u
src=$1
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" - "$tmp" <<'PY' || fail "making the state_dicts"
import sys, numpy as np, torch, torch.nn as nn
d = sys.argv[1]
torch.manual_seed(0)
class Net(nn.Module):  # PyTorch's examples/mnist network (dropout has no parameters)
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1); self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25); self.fc1 = nn.Linear(9216, 128); self.fc2 = nn.Linear(128, 10)
torch.save(Net().state_dict(), d + "/named.pt")
seq = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(), nn.Linear(128, 10))
torch.save({"state_dict": seq.state_dict()}, d + "/sequential.pt")
bad = Net(); bad.fc1 = nn.Linear(9216, 64); bad.fc2 = nn.Linear(64, 10)
torch.save(bad.state_dict(), d + "/wrong.pt")
np.save(d + "/x.npy", np.random.default_rng(1).uniform(-1, 1, (4, 1, 28, 28)).astype(np.float32))
PY
for sd in named sequential; do
  "$PYTHON" "$src/golden/export_torch.py" --model mnist-cnn --state-dict "$tmp/$sd.pt" --input "$tmp/x.npy" \
      --golden "$tmp/$sd-golden.h5" --weights "$tmp/$sd-weights.h5" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "export $sd"; }
  "$FIVEFOLD" verify --model mnist-cnn --golden "$tmp/$sd-golden.h5" --trust >"$tmp/v" 2>&1; rc=$?
  [ $rc -eq 0 ] || { cat "$tmp/v"; fail "verify on the $sd export exited $rc"; }
  tail -n 1 "$tmp/v" | grep -Eq '^13 passed, 0 failed$' || fail "verify summary: $(tail -n 1 "$tmp/v")"
  # infer with the weights file on the golden's input gives the output verify checked, bit for bit.
  vd=$(grep 'end-to-end-output' "$tmp/v" | sed -n 's/.*digest=\([0-9a-f]*\).*/\1/p')
  "$FIVEFOLD" infer --model mnist-cnn --weights "$tmp/$sd-weights.h5" --input "$tmp/$sd-golden.h5" >"$tmp/i" 2>&1 || { cat "$tmp/i"; fail "infer"; }
  id=$(sed -n 's/^output digest: \([0-9a-f]*\)$/\1/p' "$tmp/i")
  [ -n "$vd" ] && [ "$vd" = "$id" ] || fail "$sd: verify output digest '$vd' != infer output digest '$id'"
  # mpi = serial bit for bit on a golden without recorded digests: serial's digests are computed in
  # the same run ("=serial" on every row with an output); an injected fault in mpi makes them differ.
  if [ -n "${MPIEXEC:-}" ]; then
    "$MPIEXEC" -n 2 "$FIVEFOLD" verify --model mnist-cnn --mode mpi --split rows --golden "$tmp/$sd-golden.h5" --trust >"$tmp/m" 2>&1; rc=$?
    [ $rc -eq 0 ] || { cat "$tmp/m"; fail "mpi verify on the $sd export exited $rc"; }
    n=$(grep -c 'digest=[0-9a-f]*=serial ' "$tmp/m")
    [ "$n" -eq 12 ] || { cat "$tmp/m"; fail "mpi rows compared with serial's digest: $n, expected 12"; }
    "$MPIEXEC" -n 2 "$FIVEFOLD" verify --model mnist-cnn --mode mpi --split rows --golden "$tmp/$sd-golden.h5" --trust \
        --inject-fault fc2 >"$tmp/m" 2>&1; rc=$?
    [ $rc -eq 4 ] || fail "mpi verify with a fault exited $rc, expected 4"
    grep -E 'fc2\(.*!=serial .*FAIL' "$tmp/m" >/dev/null || { cat "$tmp/m"; fail "fc2 row not '!=serial' FAIL"; }
  fi
  # without --trust the export is refused (not in the manifest)
  "$FIVEFOLD" verify --model mnist-cnn --golden "$tmp/$sd-golden.h5" >/dev/null 2>&1; rc=$?
  [ $rc -eq 2 ] || fail "untrusted export exited $rc, expected 2"
done
"$PYTHON" "$src/golden/export_torch.py" --model mnist-cnn --state-dict "$tmp/wrong.pt" --input "$tmp/x.npy" \
    --golden "$tmp/wrong.h5" >"$tmp/log" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "wrong-shape state_dict exited $rc, expected 2"
grep -q "fc1.weight/fc1.bias -> fc1: shapes (64, 9216)" "$tmp/log" || fail "message: $(cat "$tmp/log")"
echo ok
