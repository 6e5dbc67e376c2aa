#!/usr/bin/env python3
"""Mutation check of verify/unit/test_layers_cpu.c (run by hand, not a CTest test).

Each mutant is core/layers_cpu.c with one deliberate bug (pad off by one, transposed kernel, bias
added last, wrong loop order, band indexing, NaN dropped, ...). The unit test is compiled against
each mutant in a temporary directory and must fail; the script prints which tests caught it and
exits 1 if any mutant survives.  Usage: python3 verify/unit/layers_mutants.py [CC]
"""
import os, re, subprocess, sys, tempfile
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CC = sys.argv[1] if len(sys.argv) > 1 else 'cc'
src = open(os.path.join(ROOT, 'core/layers_cpu.c')).read()
muts={
 'conv_bias_last': [('for (int64_t ow = 0; ow < Wo; ow++) yr[ow] = b[k];', 'for (int64_t ow = 0; ow < Wo; ow++) yr[ow] = 0.0f;'),
                    ('            }\n        }\n    }\n}\n\n// PyTorch\'s relu', '            }\n            for (int64_t k = 0; k < K; k++) for (int64_t ow = 0; ow < Wo; ow++) y[(k * out_rows + ol) * Wo + ow] += b[k];\n        }\n    }\n}\n\n// PyTorch\'s relu')],
 'linear_bias_last': [('float a0 = b[j], a1', 'float a0 = 0, a1'), ('y[0] = a0,', 'y[0] = a0 + b[j],')],
 'pad_off_by_one': ('const int64_t ih = oh * st - pad + r;\n                    if (ih < 0 || ih >= H) continue;  // padding row', 'const int64_t ih = oh * st - (pad + 1) + r;\n                    if (ih < 0 || ih >= H) continue;  // padding row'),
 'transposed_kernel': ('const float *wks = w + (c * R + r) * S + s;', 'const float *wks = w + (c * R + s) * S + r;'),
 'conv_bias_missing': ('for (int64_t ow = 0; ow < Wo; ow++) yr[ow] = b[k];', 'for (int64_t ow = 0; ow < Wo; ow++) yr[ow] = 0.0f;'),
 'conv_c_and_r_swapped': ('for (int64_t c = 0; c < C; c++) {\n                for (int64_t r = 0; r < R; r++) {', 'for (int64_t r = 0; r < R; r++) {\n                for (int64_t c = 0; c < C; c++) {'),
 'band_ignores_in_lo': ('(ih - rows->in_lo)) * W;  // (W)', 'ih) * W;  // (W)'),
 'gather_wrong_stride': ('gather[i] = src[i * st];', 'gather[i] = src[i * (st - 1)];'),
 'relu_max_zero': ('out[i] = in[i] < 0.0f ? 0.0f : in[i];', 'out[i] = in[i] > 0.0f ? in[i] : 0.0f;'),
 'maxpool_drops_nan': ('if (v > m || isnan(v)) m = v;', 'if (v > m) m = v;'),
 'maxpool_last_max_wins': ('if (v > m || isnan(v)) m = v;', 'if (v >= m || isnan(v)) m = v;'),
 'lrn_window_mirrored': ('c0 = max64(0, c - size / 2), c1 = min64(C - 1, c + (size - 1) / 2);', 'c0 = max64(0, c - (size - 1) / 2), c1 = min64(C - 1, c + size / 2);'),
 'lrn_alpha_not_over_size': ('const float avg = sum / (float)size;', 'const float avg = sum;'),
 'linear_tail_bias_missing': ('float a = b[j];', 'float a = 0;'),
 'linear_row_swap': ('a1 += w0[I + i] * xi;', 'a1 += w0[2 * I + i] * xi;'),
 'softmax_no_max': ('const float d = x[i] - m;', 'const float d = x[i];'),
 'softmax_sum_skips_last': ('sum += y[i];', 'if (i + 1 < classes) sum += y[i];'),
 'conv_s_descending': ('for (int64_t s = 0; s < S; s++) {\n                        int64_t lo, hi;', 'for (int64_t s = S - 1; s >= 0; s--) {\n                        int64_t lo, hi;'),
 'maxpool_band_ignores_in_lo': ('const float *xr = x + (ih - rows->in_lo) * W;', 'const float *xr = x + ih * W;'),
 'maxpool_pad_ignored': ('const int64_t iw = ow * st - pad + s;', 'const int64_t iw = ow * st + s;'),
}
survivors = []
tmp = tempfile.mkdtemp(prefix='layers_mutants_')
for name,pairs in muts.items():
    if isinstance(pairs,tuple): pairs=[pairs]
    m=src
    for a,b in pairs:
        assert m.count(a)==1, name
        m=m.replace(a,b,1)
    mc = os.path.join(tmp, 'mutant.c')
    open(mc, 'w').write(m)
    exe = os.path.join(tmp, 'mutant')
    srcs = [os.path.join(ROOT, f) for f in ('verify/unit/test_layers_cpu.c', 'core/model.c', 'core/status.c')]
    b = subprocess.run([CC, '-O2', '-std=c11', '-ffp-contract=off', '-D_GNU_SOURCE', '-I', os.path.join(ROOT, 'core/include'),
                        *srcs, mc, '-lcmocka', '-lm', '-o', exe], capture_output=True, text=True)
    if b.returncode != 0:
        print(f'{name}: does not compile:\n{b.stderr}')
        survivors.append(name)
        continue
    r = subprocess.run([exe], capture_output=True, text=True, timeout=300)
    failed = sorted(set(re.findall(r'\[  FAILED  \] (test_\w+)', r.stdout + r.stderr)))
    print(f'{name:28s} exit {r.returncode}  caught by: {", ".join(failed) or "NOTHING"}')
    if r.returncode == 0:
        survivors.append(name)
print(f'{len(muts) - len(survivors)} of {len(muts)} mutants caught' + (f'; SURVIVED: {survivors}' if survivors else ''))
sys.exit(1 if survivors else 0)
