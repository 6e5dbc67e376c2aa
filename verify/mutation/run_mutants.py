#!/usr/bin/env python3
"""Mutation testing of libfivefold: each mutant of verify/mutation/mutants.py is one deliberate bug
(exact text replaced in one source file); the tests named by its kill regex must fail on it.

  run_mutants.py --check [--build-dir B]   every pattern occurs exactly once in the sources (and, with
                                           B, every kill regex selects at least one test of B)
  run_mutants.py [--only a,b] [--keep]     the full run (CTest test mutation_run)
  run_mutants.py --gpu [-j N] [-w W]       the GPU mutants (mutants.py's G): the same run on a CUDA
                                           build (sm_90a or $FF_CUDA_ARCH; cmocka from .deps/usr if
                                           there), on a machine with a GPU (ci/gpu's gpu-mutants step)

The full run copies the source tree (git ls-files, tracked and untracked-not-ignored; golden *.h5
symlinked, not copied) to a temporary directory, configures it once (Release, no CUDA, Ninja),
builds the test programs the kill regexes select and runs them unmutated (all must pass). Then for
each mutant: patch, rebuild those programs (ninja recompiles the one changed object and relinks),
run `ctest -R REGEX`, restore. A mutant is killed when a selected test fails; a mutant that does
not compile is a runner error, not a kill. Prints one row per mutant and
"N killed, M survived, S known survivors, K errors"; exits 1 if any mutant survives (other than
a known survivor, marked in mutants.py with the test change that would kill it), any pattern is stale (does not
occur exactly once: "pattern no longer applies") or anything else fails.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from mutants import MUTANTS  # noqa: E402

TEST_TIMEOUT_S = 150  # per test: a mutant that hangs a test counts as killed after this


def stale_patterns(root):
    """[(mutant, file, message)] for every replacement whose text does not occur exactly once."""
    bad = []
    seen = set()
    for m in MUTANTS:
        if m['name'] in seen:
            bad.append((m['name'], m['file'], 'duplicate mutant name'))
        seen.add(m['name'])
        path = os.path.join(root, m['file'])
        if not os.path.isfile(path):
            bad.append((m['name'], m['file'], 'file does not exist'))
            continue
        text = open(path, encoding='utf-8').read()
        for k, (find, repl) in enumerate(m['subs']):
            n = text.count(find)
            if n != 1:
                bad.append((m['name'], m['file'],
                            f'pattern no longer applies: replacement {k + 1} found {n} times, expected once: '
                            f'{find.splitlines()[0].strip()!r}'))
            elif find == repl:
                bad.append((m['name'], m['file'], f'replacement {k + 1} changes nothing'))
    return bad


def ctest_tests(build):
    """{test name: [words of its command, and of its environment for script tests]} of a build."""
    r = subprocess.run(['ctest', '--test-dir', build, '--show-only=json-v1'], capture_output=True, text=True,
                       check=True)
    tests = {}
    for t in json.loads(r.stdout)['tests']:
        words = list(t.get('command', []))
        # A script may run $FIVEFOLD; the cmocka programs (every test CTest lists without a command
        # before it is built, or whose program is named as the test) never read the environment.
        program = not words or os.path.basename(words[0]) == t['name']
        for p in t.get('properties', []):
            if p['name'] == 'ENVIRONMENT' and not program:
                words += [v.split('=', 1)[-1] for v in p['value']]
        tests[t['name']] = words
    return tests


def selected(tests, regex):
    rx = re.compile(regex)
    return sorted(n for n in tests if rx.search(n))


def check(root, build):
    bad = stale_patterns(root)
    if build:
        tests = ctest_tests(build)
        gpu_build = any(n.startswith('test_gpu') for n in tests)  # a build without CUDA has no GPU tests
        for m in MUTANTS:
            if m['gpu'] and not gpu_build:
                continue
            if not selected(tests, m['kill']):
                bad.append((m['name'], m['file'], f'kill regex {m["kill"]!r} selects no test of {build}'))
    for name, f, msg in bad:
        print(f'STALE {name} ({f}): {msg}')
    files = sorted({m['file'] for m in MUTANTS})
    print(f'{len(MUTANTS)} mutants ({sum(m["gpu"] for m in MUTANTS)} of them GPU) in {len(files)} files: '
          f'{len(MUTANTS) - len({b[0] for b in bad})} apply, {len({b[0] for b in bad})} stale')
    return 1 if bad else 0


def source_files(root):
    try:
        r = subprocess.run(['git', '-C', root, 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
                           capture_output=True, check=True)
        return [f for f in r.stdout.decode().split('\0') if f and os.path.isfile(os.path.join(root, f))]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file but builds
        out = []
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if not (x.startswith('build') or x.startswith('.'))]
            out += [os.path.relpath(os.path.join(d, f), root) for f in files]
        return out


def copy_tree(root, dst):
    for f in source_files(root):
        s, d = os.path.join(root, f), os.path.join(dst, f)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        if f.endswith('.h5'):
            os.symlink(s, d)  # read-only data, 27 MB: never patched
        else:
            shutil.copy2(s, d)


def run(cmd, cwd=None, timeout=None, env=None):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


# A mutant's tests need to fail once, not report every failure: cmocka programs abort at their
# first failed assertion (CTest lists them as failed, "Subprocess aborted"), so a mutant that the
# first case of test_comm_loopback catches does not wait for the other cases.
MUTANT_TEST_ENV = dict(os.environ, CMOCKA_TEST_ABORT='1')


def targets_for(tests, names, build, known):
    """Ninja targets (paths relative to build) of the programs the tests run."""
    out = set()
    for n in names:
        # Before its program is built, CTest lists a test without its command: the programs of
        # ff_add_test are named as their test.
        out.update(k for k in known if os.path.basename(k) == n)
        for w in tests[n]:
            w = w.split('=', 1)[-1]  # NAME=/path (cmake -E env)
            if os.path.isabs(w) and w.startswith(build + os.sep):
                rel = os.path.relpath(w, build)
                if rel in known:
                    out.add(rel)
    return sorted(out)


def failed_tests(output):
    m = re.search(r'The following tests FAILED:\n((?:\s+\d+ - .*\n?)*)', output)
    if not m:
        return []
    return [re.sub(r'^\s*\d+ - (\S+).*$', r'\1', l) for l in m.group(1).splitlines() if l.strip()]


def skipped_tests(output):
    """The tests CTest lists as not run (a GPU test without a GPU, an MPI test without MPI)."""
    m = re.search(r'The following tests did not run:\n((?:\s+\d+ - .*\n?)*)', output)
    if not m:
        return []
    return [re.sub(r'^\s*\d+ - (\S+).*$', r'\1', l) for l in m.group(1).splitlines() if l.strip()]


def configure(root, src, build, gpu=False):
    """Copies the sources to src and configures build (Release at -O2, no CUDA, Ninja): None, or what
    failed. -O2, not -O3: what a mutant changes and which tests see it does not depend on the level
    (no FMA contraction, no fast-math at either), and the CPU kernels' unrolled copies compile 3x
    faster (core/device/cpu/layers_cpu.c: 2.4 against 7.4 s), which most of the mutants rebuild.
    gpu: with CUDA instead (the GPU mutants), for $FF_CUDA_ARCH (default 90a, the GPU machines'),
    cmocka found under the checkout's .deps/usr where it is (ci/gpu's set-up)."""
    copy_tree(root, src)
    if gpu:
        deps = os.path.join(root, '.deps', 'usr')
        cuda = ['-DFF_WITH_CUDA=ON', '-DCMAKE_CUDA_ARCHITECTURES=' + os.environ.get('FF_CUDA_ARCH', '90a')]
        cuda += ['-DCMAKE_PREFIX_PATH=' + deps] if os.path.isdir(deps) else []
    else:
        cuda = ['-DFF_WITH_CUDA=OFF']
    r = run(['cmake', '-S', src, '-B', build, '-G', 'Ninja', '-DCMAKE_BUILD_TYPE=Release', *cuda,
             '-DCMAKE_C_FLAGS_RELEASE=-O2 -DNDEBUG'])
    return None if r.returncode == 0 else r.stdout[-3000:] + r.stderr[-3000:] + '\nconfigure of the copied tree failed'


def try_mutant(m, names, targets, src, build, jobs):
    """Patches one mutant into src, rebuilds its kill tests' programs, runs them, restores the file.
    Returns (outcome, text): outcome one of killed, survived, known, error."""
    path = os.path.join(src, m['file'])
    assert not os.path.islink(path), path
    orig = open(path, encoding='utf-8').read()
    text = orig
    for find, repl in m['subs']:
        text = text.replace(find, repl, 1)
    open(path, 'w', encoding='utf-8').write(text)
    try:
        b = run(['ninja', '-C', build, f'-j{jobs}'] + targets)
        if b.returncode:
            errs = [l for l in b.stdout.splitlines() if 'error' in l][:3]
            return 'error', 'ERROR: mutant did not compile: ' + ' | '.join(errs)
        c = run(['ctest', '--test-dir', build, '-R', m['kill'], f'-j{jobs}', '--timeout', str(TEST_TIMEOUT_S)],
                env=MUTANT_TEST_ENV)
        f = failed_tests(c.stdout)
        if f and m.get('survives'):
            return 'error', 'killed by ' + ', '.join(f) + ': killed now, remove its survives= mark in mutants.py'
        if c.returncode and f:
            return 'killed', 'killed by ' + ', '.join(f)
        if c.returncode:
            return 'error', 'ERROR: ctest failed without a failing test:' + c.stdout[-300:]
        if m.get('survives'):
            return 'known', 'known survivor (' + ', '.join(names) + ' passed); needs: ' + m['survives']
        return 'survived', 'SURVIVED (' + ', '.join(names) + ' passed)'
    finally:
        open(path, 'w', encoding='utf-8').write(orig)


def full_run(root, only, keep, jobs, workers, gpu=False):
    bad = stale_patterns(root)
    muts = [m for m in MUTANTS if m['gpu'] == gpu and (not only or m['name'] in only)]
    if only and len(muts) != len(only):
        unknown = sorted(set(only) - {m['name'] for m in MUTANTS})
        other = sorted(set(only) - set(unknown) - {m['name'] for m in muts})
        if unknown:
            print(f'unknown mutant(s): {unknown}')
        if other:
            print(f'{other}: ' + ('CPU mutant(s): run without --gpu' if gpu else 'GPU mutant(s): run with --gpu'))
        return 1
    for name, f, msg in bad:
        print(f'STALE {name} ({f}): {msg}')
    if bad:
        print(f'0 killed, 0 survived, {len(bad)} errors (stale patterns: nothing was run)')
        return 1
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix='ff_mutation_')
    # One copy of the tree per worker (a CMake build tree cannot be moved, so each configures and
    # builds its own); each worker takes the next mutant as it finishes one. A mutant's rebuild is
    # one compile and a few links, one core's work, so on 2 cores two workers run the mutants in
    # about half the time of one, for one more build of the kill tests' programs.
    workers = max(1, min(workers, len(muts)))
    per = max(1, jobs // workers)  # ninja and ctest jobs within a worker
    trees = [(os.path.join(tmp, f'w{k}', 'src'), os.path.join(tmp, f'w{k}', 'build')) for k in range(workers)]
    try:
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            for err in pool.map(lambda t: configure(root, *t, gpu=gpu), trees):
                if err:
                    print(err)
                    return 1
        build0 = trees[0][1]
        tests = ctest_tests(build0)
        known = set(l.split(':')[0] for l in run(['ninja', '-C', build0, '-t', 'targets', 'all']).stdout.splitlines())
        plan = []
        for m in muts:
            names = selected(tests, m['kill'])
            if not names:
                print(f'ERROR {m["name"]}: kill regex {m["kill"]!r} selects no test' +
                      (' (--gpu: this build has no GPU tests; is a CUDA toolkit on the PATH?)' if gpu else ''))
                return 1
            plan.append((m, names, targets_for(tests, names, build0, known)))  # relative: every tree's
        all_targets = sorted({t for _, _, ts in plan for t in ts})
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            for r in pool.map(lambda t: run(['ninja', '-C', t[1], f'-j{per}'] + all_targets), trees):
                if r.returncode:
                    print(r.stdout[-5000:] + '\nbuild of the unmutated copy failed')
                    return 1
        # Unmutated, every selected test must pass: otherwise a "kill" would mean nothing. (The
        # other trees hold the same build of the same sources.)
        all_names = sorted({n for _, ns, _ in plan for n in ns})
        regex = '^(' + '|'.join(re.escape(n) for n in all_names) + ')$'
        r = run(['ctest', '--test-dir', build0, '-R', regex, f'-j{jobs}', '--timeout', str(TEST_TIMEOUT_S)])
        if r.returncode:
            print(r.stdout[-5000:] + f'\nunmutated: tests failed {failed_tests(r.stdout)}: fix them first')
            return 1
        skipped = skipped_tests(r.stdout)
        if skipped:  # a skipped test passes whatever the mutant: every mutant would "survive"
            print(f'unmutated: tests skipped {skipped}: a test that does not run cannot kill a mutant' +
                  (' (--gpu needs a machine with a GPU)' if gpu else ''))
            return 1
        print(f'unmutated copy built ({workers} worker{"s" if workers > 1 else ""}) and its {len(all_names)} kill '
              f'tests pass ({time.time() - t0:.0f} s)')
        print(f'{"mutant":34s} {"file":24s} {"s":>5s}  result', flush=True)
        outcomes = {'killed': [], 'survived': [], 'known': [], 'error': []}
        queue = list(reversed(plan))
        lock = threading.Lock()

        def worker(tree):
            while True:
                with lock:
                    if not queue:
                        return
                    m, names, targets = queue.pop()
                t1 = time.time()
                try:
                    outcome, res = try_mutant(m, names, targets, tree[0], tree[1], per)
                except Exception as e:  # noqa: BLE001 - a runner failure is an error row, never a kill
                    outcome, res = 'error', f'ERROR: {type(e).__name__}: {e}'
                with lock:
                    outcomes[outcome].append(m['name'])
                    print(f'{m["name"]:34s} {m["file"]:24s} {time.time() - t1:5.1f}  {res}', flush=True)

        threads = [threading.Thread(target=worker, args=(t,)) for t in trees]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        killed, survived, known, errors = (outcomes[k] for k in ('killed', 'survived', 'known', 'error'))
        print(f'{len(killed)} killed, {len(survived)} survived, {len(known)} known survivors, {len(errors)} errors '
              f'({len(muts)} mutants, {time.time() - t0:.0f} s)')
        if survived:
            print('SURVIVED: ' + ', '.join(survived))
        return 1 if survived or errors else 0
    finally:
        if keep:
            print(f'kept {tmp}')
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--check', action='store_true', help='only check that every pattern applies')
    ap.add_argument('--build-dir', help='with --check: also check every kill regex selects a test here')
    ap.add_argument('--only', help='comma-separated mutant names')
    ap.add_argument('--keep', action='store_true', help='keep the temporary tree')
    ap.add_argument('--list', action='store_true', help='list the mutants')
    ap.add_argument('--gpu', action='store_true', help='run the GPU mutants on a CUDA build (needs a GPU)')
    ap.add_argument('-j', '--jobs', type=int, default=2, help='cores to use (default 2)')
    ap.add_argument('-w', '--workers', type=int, default=None,
                    help='mutants tried at once, each in its own copy of the tree (default: --jobs)')
    ap.add_argument('--source', default=ROOT, help='source tree to mutate (default: this checkout)')
    a = ap.parse_args()
    if a.list:
        for m in MUTANTS:
            print(f'{m["name"]:34s} {m["file"]:24s} {m["kill"]}{"  (GPU)" if m["gpu"] else ""}')
        return 0
    if a.check:
        return check(os.path.abspath(a.source), a.build_dir)
    if a.jobs < 1:
        ap.error(f'--jobs {a.jobs}: expected 1 or more cores')
    if a.workers is not None and a.workers < 1:
        ap.error(f'--workers {a.workers}: expected 1 or more')
    return full_run(os.path.abspath(a.source), set(a.only.split(',')) if a.only else None, a.keep, a.jobs,
                    a.workers if a.workers is not None else a.jobs, a.gpu)


if __name__ == '__main__':
    sys.exit(main())
