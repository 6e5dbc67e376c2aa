#!/usr/bin/env python3
"""When `make_golden.py --check` may skip (exit 77) instead of failing: only where PyTorch itself
could round differently from the PyTorch that made the golden (another torch version, another CPU
capability, or a golden that does not record its capability). Each case must give its reason;
the same torch on the same capability must give none (the bit-for-bit comparison is then made).
Usage: test_pytorch_differs.py REPO_ROOT; prints PASS last when every case holds."""
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "golden"))
import make_golden  # noqa: E402
import torch  # noqa: E402

here_cap = make_golden.cpu_capability()
failed = 0


def case(what, attrs, want_reason, must_say):
    global failed
    why = make_golden.pytorch_differs(attrs)
    ok = (why is not None) == want_reason and (not must_say or (why and must_say in why))
    print("  %-44s %-60s %s" % (what, why or "(compared bit for bit)", "PASS" if ok else "FAIL"))
    failed += not ok


assert here_cap not in ("", "unknown"), "torch.__config__.show() names no CPU capability: %r" % here_cap
same = {"torch_version": torch.__version__.encode(), "torch_cpu_capability": here_cap.encode()}
case("same torch, same capability", same, False, None)
case("same torch, same capability (str attrs)", {k: v.decode() for k, v in same.items()}, False, None)
case("another torch", dict(same, torch_version=b"0.0.1"), True, "torch 0.0.1")
case("another CPU capability", dict(same, torch_cpu_capability=b"NOT-" + here_cap.encode()), True,
     "NOT-" + here_cap)
case("capability not recorded", {"torch_version": torch.__version__.encode()}, True, "does not record")
print("FAIL" if failed else "PASS")
sys.exit(1 if failed else 0)
