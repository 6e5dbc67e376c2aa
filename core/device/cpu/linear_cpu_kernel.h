// The batched linear kernel of layers_cpu.c, written once and compiled once per vector width, as
// conv_cpu_kernel.h is. layers_cpu.c includes this file once a copy, with
//   LK_SUFFIX  name suffix of the functions defined here (linear_block_##, linear_run_##)
//   LK_VEC     the vector type of LK_LANES floats
//   LK_LANES   floats per vector: that many images of one output feature j share a vector
//   LK_ACC     accumulator vectors a block keeps in registers (images x features)
//   LK_TARGET  a function attribute: the instruction set this copy is compiled for
// Each lane is one output element (image, j) and receives exactly the scalar sequence the header of
// layers_cpu.h documents: b[j] (or the value stored after the previous chunk of inputs), then
// w[j,i] * x[i] for i ascending, each a separate float multiply and add. So the bits are the plain
// loop's, for any batch, block or vector width (test_layers_cpu compares every copy).
// Not a header of its own: no include guard on purpose.
#define LK_CAT2(a, b) a##b
#define LK_CAT(a, b) LK_CAT2(a, b)
// Inputs a chunk: a block's inputs are transposed into xt (LK_CHUNK, images) so that the images of
// one input i are one vector; 32 KiB on the stack at 512 bits (callers own memory, no malloc).
#define LK_CHUNK 128
#define LK_IMG (4 * LK_LANES)  // images a block at most: 4 vectors

// Computes features j0 .. j0+jb-1 of nv * LK_LANES images for the inputs [i0, i0 + ic) of one
// chunk; nv, jb are constants after inlining, so acc[] lives in registers.
// out: (n, J) whole; xt: (ic, nv * LK_LANES) this block's inputs, transposed, absent images 0;
// w: (J, I); b: (J); img0, ni: the block's first image and how many are present.
static inline __attribute__((always_inline)) LK_TARGET void LK_CAT(linear_block_, LK_SUFFIX)(
    float *out, const float *xt, const float *w, const float *b, int64_t I, int64_t J, int64_t img0, int64_t ni,
    int64_t i0, int64_t ic, int64_t j0, const int nv, const int jb) {
    LK_VEC acc[LK_ACC];              // acc[jj * nv + v]: feature j0 + jj of images v * LK_LANES ..
    const float *wr[LK_ACC];         // (ic): row j0 + jj of w from input i0 (a row past J reads row J - 1,
    for (int jj = 0; jj < jb; jj++)  // computed and never stored: no read outside w)
        wr[jj] = w + (j0 + jj < J ? j0 + jj : J - 1) * I + i0;
    for (int jj = 0; jj < jb; jj++)
        for (int v = 0; v < nv; v++) {
            float t[LK_LANES] = {0};
            const int64_t j = j0 + jj;
            for (int l = 0; l < LK_LANES; l++) {
                const int64_t img = v * LK_LANES + l;
                if (img < ni && j < J) t[l] = i0 == 0 ? b[j] : out[(img0 + img) * J + j];
            }
            memcpy(&acc[jj * nv + v], t, sizeof t);
        }
    for (int64_t i = 0; i < ic; i++) {
        LK_VEC xv[4];
        for (int v = 0; v < nv; v++) memcpy(&xv[v], xt + (i * nv + v) * LK_LANES, sizeof xv[v]);
        for (int jj = 0; jj < jb; jj++) {
            const float wji = wr[jj][i];
            for (int v = 0; v < nv; v++) acc[jj * nv + v] += wji * xv[v];
        }
    }
    for (int jj = 0; jj < jb; jj++)
        for (int v = 0; v < nv; v++) {
            float t[LK_LANES];
            memcpy(t, &acc[jj * nv + v], sizeof t);
            const int64_t j = j0 + jj;
            for (int l = 0; l < LK_LANES; l++) {
                const int64_t img = v * LK_LANES + l;
                if (img < ni && j < J) out[(img0 + img) * J + j] = t[l];
            }
        }
}

// out: (n, J); in: (n, I); w: (J, I); b: (J). Blocks of up to LK_IMG images; in each, chunks of
// LK_CHUNK inputs, transposed once and used by every block of features.
static LK_TARGET void LK_CAT(linear_run_, LK_SUFFIX)(float *out, const float *in, const float *w, const float *b,
                                                     int64_t I, int64_t J, int64_t n) {
    float xt[LK_CHUNK * LK_IMG];  // (LK_CHUNK, images of the block)
    for (int64_t img0 = 0; img0 < n; img0 += LK_IMG) {
        const int64_t ni = n - img0 < LK_IMG ? n - img0 : LK_IMG;
        const int nv = ni > 2 * LK_LANES ? 4 : ni > LK_LANES ? 2 : 1;  // vectors of images
        const int width = nv * LK_LANES;
        for (int64_t i0 = 0; i0 < I; i0 += LK_CHUNK) {
            const int64_t ic = I - i0 < LK_CHUNK ? I - i0 : LK_CHUNK;
            for (int64_t i = 0; i < ic; i++)
                for (int64_t img = 0; img < width; img++)
                    xt[i * width + img] = img < ni ? in[(img0 + img) * I + i0 + i] : 0.0f;
            switch (nv) {
                case 4:
                    for (int64_t j0 = 0; j0 < J; j0 += LK_ACC / 4)
                        LK_CAT(linear_block_, LK_SUFFIX)(out, xt, w, b, I, J, img0, ni, i0, ic, j0, 4, LK_ACC / 4);
                    break;
                case 2:
                    for (int64_t j0 = 0; j0 < J; j0 += LK_ACC / 2)
                        LK_CAT(linear_block_, LK_SUFFIX)(out, xt, w, b, I, J, img0, ni, i0, ic, j0, 2, LK_ACC / 2);
                    break;
                default:
                    for (int64_t j0 = 0; j0 < J; j0 += LK_ACC)
                        LK_CAT(linear_block_, LK_SUFFIX)(out, xt, w, b, I, J, img0, ni, i0, ic, j0, 1, LK_ACC);
                    break;
            }
        }
    }
}

#undef LK_CHUNK
#undef LK_IMG
#undef LK_CAT
#undef LK_CAT2
