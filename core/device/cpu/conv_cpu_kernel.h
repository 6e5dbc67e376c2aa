// The register-blocked conv2d kernel of layers_cpu.c, written once and compiled once per vector
// width (the way ggml writes its SIMD paths): layers_cpu.c includes this file twice, with
//   CK_SUFFIX  name suffix of the two functions defined here (conv_block_##, conv_run_##)
//   CK_VEC     the vector type of CK_LANES floats
//   CK_LANES   floats per vector; FF_KB / CK_LANES vectors hold the 8 k of one pixel
//   CK_PB      pixels per block (accumulators: CK_PB * FF_KB / CK_LANES vectors)
//   CK_TARGET  a function attribute: the instruction set this copy is compiled for
// Each lane does, for its output element, the scalar multiply then add the header of layers_cpu.h
// documents, whatever CK_LANES is: both copies give the same bits (test_layers_cpu checks).
// Not a header of its own: no include guard on purpose.
#define CK_CAT2(a, b) a##b
#define CK_CAT(a, b) CK_CAT2(a, b)
#define CK_NV (FF_KB / CK_LANES)

// Updates pb (a compile-time constant after inlining) pixels ow0 .. ow0+pb-1 of output row oh
// (local row ol) for the kl valid lanes of one k block, over channels [c0, c1).
// y: (K, out_rows, Wo) of one image, already offset to channel k0; x: (C, in_rows, W) of one
// image; wp: packed (c1-c0, R, S, FF_KB); bias: (kl) or NULL to continue from y.
static inline __attribute__((always_inline)) CK_TARGET void CK_CAT(conv_block_, CK_SUFFIX)(
    float *y, const float *x, const float *wp, const float *bias, const conv_geom *g, int kl, int64_t c0, int64_t c1,
    int64_t oh, int64_t ol, int64_t ow0, const int pb) {
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
        float t[FF_KB] = {0};
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
    for (int64_t c = c0; c < c1; c++) {
        for (int64_t r = 0; r < g->R; r++) {
            const int64_t ih = oh * g->st - g->pad + r;
            if (ih < 0 || ih >= g->H) continue;                               // padding row: skipped
            const float *xr = x + (c * g->in_rows + (ih - g->in_lo)) * g->W;  // (W)
            const float *wr = wp + ((c - c0) * g->R + r) * g->S * FF_KB;      // (S, FF_KB)
            for (int64_t s = 0; s < g->S; s++) {
                CK_VEC w0;
                memcpy(&w0, wr + s * FF_KB, sizeof w0);
#if CK_NV == 2
                CK_VEC w1;
                memcpy(&w1, wr + s * FF_KB + CK_LANES, sizeof w1);
#endif
                const int64_t iw0 = ow0 * g->st - g->pad + s;  // input column of pixel ow0
                const int64_t lo = g->lo[s], hi = g->hi[s];
                if (lo <= ow0 && ow0 + pb <= hi) {
                    for (int p = 0; p < pb; p++) CK_MAC(p, xr[iw0 + p * g->st]);
                } else {
                    for (int p = 0; p < pb; p++)
                        if (ow0 + p >= lo && ow0 + p < hi) CK_MAC(p, xr[iw0 + p * g->st]);
                }
            }
        }
    }
#undef CK_MAC
    for (int p = 0; p < pb; p++) {
        float t[FF_KB];
        memcpy(t, &acc0[p], sizeof acc0[p]);
#if CK_NV == 2
        memcpy(t + CK_LANES, &acc1[p], sizeof acc1[p]);
#endif
        for (int l = 0; l < kl; l++) yp[l * ystride + p] = t[l];
    }
}

// The k-block / channel-chunk / segment loop nest of ff_cpu_conv2d_segments (see there), with this
// copy's kernel. cb: channels per packed chunk.
static CK_TARGET void CK_CAT(conv_run_, CK_SUFFIX)(const ff_conv_segment *segs, int n_segs, const float *w,
                                                   const float *b, const ff_layer *L, const int64_t *lo,
                                                   const int64_t *hi, int64_t cb) {
    float wp[FF_PACK_FLOATS];  // (cb, R, S, FF_KB); a local array: the compiler knows y never aliases it
    const int64_t C = L->in.c, W = L->in.w, K = L->out.c, Wo = L->out.w, R = L->kh, S = L->kw;
    for (int64_t k0 = 0; k0 < K; k0 += FF_KB) {
        const int kl = (int)min64(FF_KB, K - k0);
        for (int64_t c0 = 0; c0 < C; c0 += cb) {
            const int64_t c1 = min64(C, c0 + cb);
            // Pack w[k0 .. k0+kl, c0 .. c1, :, :] as (c, r, s, lane); absent lanes are 0 and never stored.
            // Packed once per chunk for every segment: a rank's several row bands cost one packing.
            for (int64_t c = c0; c < c1; c++)
                for (int64_t rs = 0; rs < R * S; rs++)
                    for (int64_t l = 0; l < FF_KB; l++)
                        wp[((c - c0) * R * S + rs) * FF_KB + l] = l < kl ? w[((k0 + l) * C + c) * R * S + rs] : 0.0f;
            // The first chunk starts each element from its bias; later chunks continue from the
            // value stored in out (a float store and reload is exact).
            const float *bias = c0 == 0 ? b + k0 : NULL;
            for (int q = 0; q < n_segs; q++) {
                const ff_rows *rows = &segs[q].rows;
                const int64_t in_rows = rows->in_hi - rows->in_lo;
                const int64_t out_rows = rows->out_hi - rows->out_lo;
                if (out_rows <= 0 || segs[q].n <= 0) continue;
                const int64_t in_img = C * in_rows * W;     // floats per image in the input band
                const int64_t out_img = K * out_rows * Wo;  // floats per image in the output band
                const conv_geom g = {C,      L->in.h,     W,       Wo,       R,  S, L->stride,
                                     L->pad, rows->in_lo, in_rows, out_rows, lo, hi};
                for (int64_t img = 0; img < segs[q].n; img++) {
                    const float *x = segs[q].in + img * in_img;                   // (C, in_rows, W)
                    float *y = segs[q].out + img * out_img + k0 * out_rows * Wo;  // (K - k0, out_rows, Wo)
                    for (int64_t ol = 0; ol < out_rows; ol++) {
                        const int64_t oh = rows->out_lo + ol;
                        int64_t ow0 = 0;
                        for (; ow0 + CK_PB <= Wo; ow0 += CK_PB)
                            CK_CAT(conv_block_, CK_SUFFIX)(y, x, wp, bias, &g, kl, c0, c1, oh, ol, ow0, CK_PB);
                        // the last Wo % CK_PB pixels, in blocks of constant size (halving)
                        for (int pb = CK_PB / 2; pb >= 1; pb /= 2)
                            if (Wo - ow0 >= pb) {
                                if (pb == 4)
                                    CK_CAT(conv_block_, CK_SUFFIX)(y, x, wp, bias, &g, kl, c0, c1, oh, ol, ow0, 4);
                                else if (pb == 2)
                                    CK_CAT(conv_block_, CK_SUFFIX)(y, x, wp, bias, &g, kl, c0, c1, oh, ol, ow0, 2);
                                else
                                    CK_CAT(conv_block_, CK_SUFFIX)(y, x, wp, bias, &g, kl, c0, c1, oh, ol, ow0, 1);
                                ow0 += pb;
                            }
                    }
                }
            }
        }
    }
}

#undef CK_NV
#undef CK_CAT
#undef CK_CAT2
