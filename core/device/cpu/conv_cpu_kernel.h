// The register-blocked conv2d kernel of layers_cpu.c, written once and compiled once per vector
// width (the way ggml writes its SIMD paths): layers_cpu.c includes this file once a copy, with
//   CK_SUFFIX  name suffix of the two functions defined here (conv_block_##, conv_run_##)
//   CK_VEC     the vector type of CK_LANES floats
//   CK_LANES   floats per vector
//   CK_KB      output channels k per block; CK_KB / CK_LANES vectors (1 or 2) hold them for a pixel
//   CK_PB      pixels per block, at most 16 (accumulators: CK_PB * CK_KB / CK_LANES vectors)
//   CK_BALANCED 1: a row is cut into blocks of 8..16 pixels of near-equal size (CK_PB must be 16);
//              0: into blocks of CK_PB pixels and a tail of 8, 4, 2, 1
//   CK_TARGET  a function attribute: the instruction set this copy is compiled for
// Each lane does, for its output element, the scalar multiply then add the header of layers_cpu.h
// documents, whatever CK_LANES, CK_KB or the blocks are: every copy gives the same bits
// (test_layers_cpu checks).
// Not a header of its own: no include guard on purpose.
#define CK_CAT2(a, b) a##b
#define CK_CAT(a, b) CK_CAT2(a, b)
#define CK_NV (CK_KB / CK_LANES)
// Packed weights of one k block and a chunk of channels: FF_PACK_TAPS taps (c, r, s) of CK_KB floats.
#define CK_PACK (FF_PACK_TAPS * CK_KB)
// Pixels at each end of a block that may meet a padding column while the others do not (see CK_TAPS).
#define CK_CUT 2

// One pixel, every tap checked: the blocks whose middle pixels meet padding columns go pixel by
// pixel (pads over CK_CUT columns: none in the models), so that only the small blocks carry the
// nest that checks every pixel and the copies' code stays small.
static CK_TARGET void CK_CAT(conv_pixel_, CK_SUFFIX)(float *y, const float *x, const float *wp, const float *bias,
                                                     const conv_geom *g, int kl, int64_t c0, int64_t c1, int64_t oh,
                                                     int64_t ol, int64_t ow0);

// Updates pb (a compile-time constant after inlining) pixels ow0 .. ow0+pb-1 of output row oh
// (local row ol) for the kl valid lanes of one k block, over channels [c0, c1).
// y: (K, out_rows, Wo) of one image, already offset to channel k0; x: (C, in_rows, W) of one
// image; wp: packed (c1-c0, R, S, CK_KB); bias: (kl) or NULL to continue from y.
static inline __attribute__((always_inline)) CK_TARGET void CK_CAT(conv_block_, CK_SUFFIX)(
    float *y, const float *x, const float *wp, const float *bias, const conv_geom *g, int kl, int64_t c0, int64_t c1,
    int64_t oh, int64_t ol, int64_t ow0, const int pb) {
    const bool inside = ow0 >= g->lo_all && ow0 + pb <= g->hi_all;
    if (!inside && pb > 2 * CK_CUT && !(ow0 + CK_CUT >= g->lo_all && ow0 + pb - CK_CUT <= g->hi_all)) {
        for (int p = 0; p < pb; p++) CK_CAT(conv_pixel_, CK_SUFFIX)(y, x, wp, bias, g, kl, c0, c1, oh, ol, ow0 + p);
        return;
    }
    const int64_t ystride = g->out_rows * g->Wo;  // floats between channels k and k+1
    float *yp = y + ol * g->Wo + ow0;
    // acc0[p] (and acc1[p] where a pixel's 8 k take two vectors): pixel p's k block, in separate
    // arrays indexed by constants after unrolling so that they live in registers (a 2-D array
    // does not: the compiler then keeps it in memory); lanes move only through the array t.
    CK_VEC acc0[CK_PB];
#if CK_NV == 2
    CK_VEC acc1[CK_PB];
#endif
    for (int p = 0; p < pb; p++) {
        float t[CK_KB] = {0};
        for (int l = 0; l < kl; l++) t[l] = bias ? bias[l] : yp[l * ystride + p];
        memcpy(&acc0[p], t, sizeof acc0[p]);
#if CK_NV == 2
        memcpy(&acc1[p], t + CK_LANES, sizeof acc1[p]);
#endif
    }
#if CK_NV == 2
#define CK_MAC(p, xv) (acc0[p] += w0 * (xv), acc1[p] += w1 * (xv))
#else
#define CK_MAC(p, xv) (acc0[p] += w0 * (xv))
#endif
// The tap loop nest, for c, r, s ascending. STRIDE: the distance between neighbouring pixels'
// input columns (the constant 1 where it can be, so that the pixels' loads are one base and
// constant offsets). EDGE 0: no pixel of the block meets a padding column (the inside of a row),
// nothing is checked; EDGE 1: at a tap some may, and the first and last CK_CUT pixels check the
// columns valid for them (p is a constant after unrolling, so the others' checks fold away).
#define CK_TAPS(STRIDE, EDGE)                                                                           \
    for (int64_t c = c0; c < c1; c++) {                                                                 \
        for (int64_t r = 0; r < g->R; r++) {                                                            \
            const int64_t ih = oh * g->st - g->pad + r * g->ts;                                         \
            if (ih < 0 || ih >= g->H) continue;                              /* padding row: skipped */ \
            const float *xr = x + (c * g->in_rows + (ih - g->in_lo)) * g->W; /* (W) */                  \
            const float *wr = wp + ((c - c0) * g->R + r) * g->S * CK_KB;     /* (S, CK_KB) */           \
            for (int64_t s = 0; s < g->S; s++) {                                                        \
                CK_LOAD_W(wr + s * CK_KB);                                                              \
                const int64_t iw0 = ow0 * g->st - g->pad + s * g->ts; /* input column of pixel ow0 */   \
                if ((EDGE) == 0 || (g->lo[s] <= ow0 && ow0 + pb <= g->hi[s])) {                         \
                    for (int p = 0; p < pb; p++) CK_MAC(p, xr[iw0 + p * (STRIDE)]);                     \
                } else {                                                                                \
                    for (int p = 0; p < pb; p++)                                                        \
                        if (((EDGE) == 1 && p >= CK_CUT && p < pb - CK_CUT) ||                          \
                            (ow0 + p >= g->lo[s] && ow0 + p < g->hi[s]))                                \
                            CK_MAC(p, xr[iw0 + p * (STRIDE)]);                                          \
                }                                                                                       \
            }                                                                                           \
        }                                                                                               \
    }
#if CK_NV == 2
#define CK_LOAD_W(src) \
    CK_VEC w0, w1;     \
    memcpy(&w0, (src), sizeof w0), memcpy(&w1, (src) + CK_LANES, sizeof w1)
#else
#define CK_LOAD_W(src) \
    CK_VEC w0;         \
    memcpy(&w0, (src), sizeof w0)
#endif
    // Two copies of the nest, chosen once per block: a stride-1 block whose every pixel sees every
    // tap column (the inside of a row: [g->lo_all, g->hi_all)) checks nothing and loads from one
    // base at constant offsets; any other checks, per tap, whether the whole block is inside
    // (then nothing more) and else its CK_CUT first and last pixels (all of them in a block of at
    // most 2 * CK_CUT; a wider block whose middle pixels may meet a padding column went pixel by
    // pixel above).
    if (inside && g->st == 1) {
        CK_TAPS(1, 0)
    } else {
        CK_TAPS(g->st, 1)
    }
#undef CK_TAPS
#undef CK_LOAD_W
#undef CK_MAC
    for (int p = 0; p < pb; p++) {
        float t[CK_KB];
        memcpy(t, &acc0[p], sizeof acc0[p]);
#if CK_NV == 2
        memcpy(t + CK_LANES, &acc1[p], sizeof acc1[p]);
#endif
        for (int l = 0; l < kl; l++) yp[l * ystride + p] = t[l];
    }
}

static __attribute__((noinline)) CK_TARGET void CK_CAT(conv_pixel_, CK_SUFFIX)(float *y, const float *x,
                                                                               const float *wp, const float *bias,
                                                                               const conv_geom *g, int kl, int64_t c0,
                                                                               int64_t c1, int64_t oh, int64_t ol,
                                                                               int64_t ow0) {
    CK_CAT(conv_block_, CK_SUFFIX)(y, x, wp, bias, g, kl, c0, c1, oh, ol, ow0, 1);
}

// The k-block / channel-chunk / segment loop nest of ff_cpu_conv2d_segments (see there), with this
// copy's kernel. cb: channels per packed chunk (at most CK_PACK / (R * S * CK_KB)).
// b NULL: every element starts from +0.0f.
static CK_TARGET void CK_CAT(conv_run_, CK_SUFFIX)(const ff_conv_segment *segs, int n_segs, const float *w,
                                                   const float *b, const conv_shape *cs, const int64_t *lo,
                                                   const int64_t *hi, int64_t cb) {
    static const float zeros[CK_KB];
    float wp[CK_PACK];  // (cb, R, S, CK_KB); a local array: the compiler knows y never aliases it
    const int64_t C = cs->C, W = cs->W, K = cs->K, Wo = cs->Wo, R = cs->R, S = cs->S;
    int64_t lo_all = 0, hi_all = Wo;  // output columns every tap s finds inside the row
    for (int64_t s = 0; s < S; s++) lo_all = lo[s] > lo_all ? lo[s] : lo_all, hi_all = hi[s] < hi_all ? hi[s] : hi_all;
    for (int64_t k0 = 0; k0 < K; k0 += CK_KB) {
        const int kl = (int)min64(CK_KB, K - k0);
        for (int64_t c0 = 0; c0 < C; c0 += cb) {
            const int64_t c1 = min64(C, c0 + cb);
            // Pack w[k0 .. k0+kl, c0 .. c1, :, :] as (c, r, s, lane); absent lanes are 0 and never stored.
            // Packed once per chunk for every segment: a rank's several row bands cost one packing.
            for (int64_t c = c0; c < c1; c++)
                for (int64_t rs = 0; rs < R * S; rs++)
                    for (int64_t l = 0; l < CK_KB; l++)
                        wp[((c - c0) * R * S + rs) * CK_KB + l] = l >= kl  ? 0.0f
                                                                  : cs->wt ? w[(c * K + k0 + l) * R * S + rs]
                                                                           : w[((k0 + l) * C + c) * R * S + rs];
            // The first chunk starts each element from its bias; later chunks continue from the
            // value stored in out (a float store and reload is exact).
            const float *bias = c0 != 0 ? NULL : b ? b + k0 : zeros;
            for (int q = 0; q < n_segs; q++) {
                const ff_rows *rows = &segs[q].rows;
                const int64_t in_rows = rows->in_hi - rows->in_lo;
                const int64_t out_rows = rows->out_hi - rows->out_lo;
                if (out_rows <= 0 || segs[q].n <= 0) continue;
                const int64_t in_img = C * in_rows * W;     // floats per image in the input band
                const int64_t out_img = K * out_rows * Wo;  // floats per image in the output band
                const conv_geom g = {C,      cs->H,       W,       Wo,       R,  S,  cs->st, cs->pad,
                                     cs->ts, rows->in_lo, in_rows, out_rows, lo, hi, lo_all, hi_all};
                for (int64_t img = 0; img < segs[q].n; img++) {
                    const float *x = segs[q].in + img * in_img;                   // (C, in_rows, W)
                    float *y = segs[q].out + img * out_img + k0 * out_rows * Wo;  // (K - k0, out_rows, Wo)
                    for (int64_t ol = 0; ol < out_rows; ol++) {
                        const int64_t oh = rows->out_lo + ol;
                        int64_t ow0 = 0;
#if CK_BALANCED
                        // A row of Wo >= 8 pixels in ceil(Wo / 16) blocks of near-equal size, each
                        // 8..16 pixels (13 as one block, 27 as 14 + 13): no narrow tail block, whose
                        // few add chains would wait on each other's latency.
                        if (Wo >= 8) {
                            const int64_t nb = (Wo + 15) / 16;
                            for (int64_t bi = 0; bi < nb; bi++) {
                                const int64_t end = Wo * (bi + 1) / nb;
                                // clang-format off
                                switch (end - ow0) {
#define CK_SIZE(n) case n: CK_CAT(conv_block_, CK_SUFFIX)(y, x, wp, bias, &g, kl, c0, c1, oh, ol, ow0, n); break;
                                    CK_SIZE(8) CK_SIZE(9) CK_SIZE(10) CK_SIZE(11) CK_SIZE(12)
                                    CK_SIZE(13) CK_SIZE(14) CK_SIZE(15) CK_SIZE(16)
#undef CK_SIZE
                                    default: break;  // not reached: every size is 8..16
                                }
                                // clang-format on
                                ow0 = end;
                            }
                        }
#else
                        for (; ow0 + CK_PB <= Wo; ow0 += CK_PB)
                            CK_CAT(conv_block_, CK_SUFFIX)(y, x, wp, bias, &g, kl, c0, c1, oh, ol, ow0, CK_PB);
#endif
                        // the pixels left (fewer than CK_PB, or than 8 where balanced), in blocks of
                        // constant size 8, 4, 2, 1, each smaller than CK_PB: a sum of them for any
                        // remainder below CK_PB <= 16
                        if (CK_PB > 8 && Wo - ow0 >= 8) {
                            CK_CAT(conv_block_, CK_SUFFIX)(y, x, wp, bias, &g, kl, c0, c1, oh, ol, ow0, 8);
                            ow0 += 8;
                        }
                        if (CK_PB > 4 && Wo - ow0 >= 4) {
                            CK_CAT(conv_block_, CK_SUFFIX)(y, x, wp, bias, &g, kl, c0, c1, oh, ol, ow0, 4);
                            ow0 += 4;
                        }
                        if (CK_PB > 2 && Wo - ow0 >= 2) {
                            CK_CAT(conv_block_, CK_SUFFIX)(y, x, wp, bias, &g, kl, c0, c1, oh, ol, ow0, 2);
                            ow0 += 2;
                        }
                        if (Wo - ow0 >= 1)
                            CK_CAT(conv_block_, CK_SUFFIX)(y, x, wp, bias, &g, kl, c0, c1, oh, ol, ow0, 1);
                    }
                }
            }
        }
    }
}

#undef CK_NV
#undef CK_PACK
#undef CK_CUT
#undef CK_CAT
#undef CK_CAT2
