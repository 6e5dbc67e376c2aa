// Golden files: manifest check, then validated loading (golden.h; layout in golden/README.md).
#include "fivefold/golden.h"

#include <errno.h>
#include <hdf5.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fivefold/digest.h"
#include "fivefold/h5io.h"
#include "fivefold/sha256.h"

#ifndef FF_SOURCE_DIR
#define FF_SOURCE_DIR "."
#endif

// Larger than any golden we make (AlexNet with 2 images is ~15 MB) and than a user's AlexNet
// golden with its 250 MB of weights; a bigger file is refused before it is read into memory.
#define GOLDEN_MAX_BYTES ((int64_t)2 << 30)
#define MAX_IMAGES 100000

ff_status ff_digest_class_check(const char *name) {
    size_t n = name ? strlen(name) : 0;
    bool ok = n >= 1 && n < FF_DIGEST_CLASS_MAX;
    for (size_t i = 0; ok && i < n; i++) {
        const char c = name[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
             c == '.';
    }
    if (!ok)
        return FF_FAIL(FF_ERR_INPUT,
                       "digest class '%.64s': expected 1..%d characters of a-z, A-Z, 0-9, '-', '_', '.' (it names "
                       "the group /expected/<class> of a golden)",
                       name ? name : "(null)", FF_DIGEST_CLASS_MAX - 1);
    return FF_OK;
}

const ff_golden_class *ff_golden_find_class(const ff_golden *g, const char *name) {
    if (!name || !*name) return NULL;
    for (int c = 0; c < g->n_classes; c++)
        if (strcmp(g->classes[c].name, name) == 0) return &g->classes[c];
    return NULL;
}

// The attribute of /expected/<class> that holds slot s's digest; NULL for an unused slot.
static const char *slot_attr(const ff_model *m, int s) {
    return s < m->n_layers             ? m->layers[s].name
           : s == FF_GOLDEN_E2E_LOGITS ? "end_to_end_logits"
           : s == FF_GOLDEN_E2E_OUTPUT ? "end_to_end_output"
                                       : NULL;
}

static bool file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

void ff_golden_default_path(char *out, size_t cap, const char *model) {
    snprintf(out, cap, "%s/golden/data/%s.h5", FF_SOURCE_DIR, model);
    if (file_exists(out)) return;
    snprintf(out, cap, "golden/data/%s.h5", model);
}

void ff_manifest_default(char *out, size_t cap, const char *path) {
    // 1. the golden/ directory the file sits in (golden/data/x.h5 -> golden/MANIFEST.sha256)
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = 0;
        snprintf(out, cap, "%s/../MANIFEST.sha256", dir);
    } else {
        snprintf(out, cap, "../MANIFEST.sha256");
    }
    if (file_exists(out)) return;
    // 2. the source tree's, 3. the current directory's
    snprintf(out, cap, "%s/golden/MANIFEST.sha256", FF_SOURCE_DIR);
    if (file_exists(out)) return;
    snprintf(out, cap, "golden/MANIFEST.sha256");
}

ff_status ff_manifest_lookup(char hex[65], const char *manifest, const char *name) {
    FILE *f = fopen(manifest, "r");
    if (!f)
        return FF_FAIL(FF_ERR_INTEGRITY,
                       "golden manifest '%s' cannot be read (%s): a golden file is only "
                       "used when its SHA-256 is listed there (or with --trust)",
                       manifest, strerror(errno));
    char line[2048];
    bool found = false;
    while (fgets(line, sizeof line, f)) {
        // sha256sum format: 64 hex digits, a space, a space or '*', the path.
        size_t len = strcspn(line, "\r\n");
        line[len] = 0;
        if (len < 67 || (line[64] != ' ') || (line[65] != ' ' && line[65] != '*')) continue;
        if (strcmp(base_name(line + 66), base_name(name)) != 0) continue;
        memcpy(hex, line, 64);
        hex[64] = 0;
        for (int i = 0; i < 64; i++)
            if (hex[i] >= 'A' && hex[i] <= 'F') hex[i] = (char)(hex[i] - 'A' + 'a');
        found = true;
        break;
    }
    fclose(f);
    if (!found)
        return FF_FAIL(FF_ERR_INTEGRITY,
                       "'%s' is not listed in %s: refusing to open an unlisted golden "
                       "(pass --trust to use your own golden file)",
                       name, manifest);
    return FF_OK;
}

ff_status ff_manifest_update(const char *manifest, const char *path, char old_hex[65], char new_hex[65]) {
    FF_TRY(ff_sha256_file(new_hex, path));
    old_hex[0] = 0;
    FILE *f = fopen(manifest, "r");
    char *text = NULL;
    size_t cap = 0, len = 0;
    bool replaced = false;
    if (f) {
        char line[2048];
        while (fgets(line, sizeof line, f)) {
            char out[2200];
            size_t l = strcspn(line, "\r\n");
            line[l] = 0;
            if (l >= 67 && line[64] == ' ' && strcmp(base_name(line + 66), base_name(path)) == 0) {
                memcpy(old_hex, line, 64);
                old_hex[64] = 0;
                snprintf(out, sizeof out, "%s  %s\n", new_hex, line + 66);
                replaced = true;
            } else {
                snprintf(out, sizeof out, "%s\n", line);
            }
            size_t ol = strlen(out);
            if (len + ol + 1 > cap) {
                cap = (len + ol + 1) * 2;
                char *t = realloc(text, cap);
                if (!t) {
                    free(text);
                    fclose(f);
                    return FF_FAIL(FF_ERR_OOM, "manifest update: out of memory");
                }
                text = t;
            }
            memcpy(text + len, out, ol + 1);
            len += ol;
        }
        fclose(f);
    }
    if (!replaced) {
        char out[1200];
        snprintf(out, sizeof out, "%s  data/%s\n", new_hex, base_name(path));
        size_t ol = strlen(out);
        char *t = realloc(text, len + ol + 1);
        if (!t) {
            free(text);
            return FF_FAIL(FF_ERR_OOM, "manifest update: out of memory");
        }
        text = t;
        memcpy(text + len, out, ol + 1);
        len += ol;
    }
    // Write beside and rename, so a crash never leaves a half-written manifest.
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", manifest);
    FILE *w = fopen(tmp, "w");
    if (!w) {
        free(text);
        return FF_FAIL(FF_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    }
    size_t put = fwrite(text, 1, len, w);
    int cl = fclose(w);
    free(text);
    if (put != len || cl != 0 || rename(tmp, manifest) != 0)
        return FF_FAIL(FF_ERR_IO, "cannot replace manifest '%s': %s", manifest, strerror(errno));
    return FF_OK;
}

// ---------------------------------------------------------------- reading
static ff_status read_whole(uint8_t **buf, size_t *size, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return FF_FAIL(FF_ERR_IO, "cannot open golden file '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return FF_FAIL(FF_ERR_IO, "golden '%s' is not a regular file", path);
    }
    if (st.st_size <= 0 || (int64_t)st.st_size > GOLDEN_MAX_BYTES) {
        fclose(f);
        return FF_FAIL(FF_ERR_INPUT, "golden '%s' is %lld bytes: expected 1..%lld", path, (long long)st.st_size,
                       (long long)GOLDEN_MAX_BYTES);
    }
    *size = (size_t)st.st_size;
    *buf = malloc(*size);
    if (!*buf) {
        fclose(f);
        return FF_FAIL(FF_ERR_OOM, "golden '%s': cannot allocate %zu bytes", path, *size);
    }
    size_t got = fread(*buf, 1, *size, f);
    fclose(f);
    if (got != *size) {
        free(*buf);
        *buf = NULL;
        return FF_FAIL(FF_ERR_IO, "golden '%s': read %zu of %zu bytes", path, got, *size);
    }
    return FF_OK;
}

// Opens the checked bytes as an HDF5 in-memory file image (core driver, no backing store).
static ff_status open_image(int64_t *file, const uint8_t *buf, size_t size, const char *path) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 20, 0) < 0 || H5Pset_file_image(fapl, (void *)buf, size) < 0) {
        if (fapl >= 0) H5Pclose(fapl);
        return FF_FAIL(FF_ERR_HDF5, "golden '%s': cannot set up an HDF5 file image", path);
    }
    // The core driver refuses a file image under a name that exists on disk (it would be the backing
    // store): give the image a name that names no file, as H5LTopen_file_image does.
    static int images;
    char name[96];
    snprintf(name, sizeof name, "/nonexistent/fivefold-golden-image-%d", images++);
    hid_t id = H5Fopen(name, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (id < 0) return FF_FAIL(FF_ERR_INPUT, "golden '%s': not a readable HDF5 file", path);
    *file = id;
    return FF_OK;
}

static ff_status attr_hex(uint64_t *out, int64_t loc, const char *obj, const char *attr) {
    char s[64];
    FF_TRY(ff_h5_read_attr_str(s, sizeof s, loc, obj, attr));
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 16);
    if (errno || strlen(s) != 16 || *end)
        return FF_FAIL(FF_ERR_INPUT, "attribute '%s' on '%s' is '%s': expected 16 hex digits", attr, obj, s);
    *out = (uint64_t)v;
    return FF_OK;
}

static void shape_dims(const ff_shape *s, int64_t n, int *rank, int64_t dims[4]) {
    // Flat tensors (flatten, linear, softmax outputs) are stored as (n, features); maps as (n, C, H, W).
    if (s->h == 1 && s->w == 1) {
        *rank = 2;
        dims[0] = n;
        dims[1] = s->c;
    } else {
        *rank = 4;
        dims[0] = n;
        dims[1] = s->c;
        dims[2] = s->h;
        dims[3] = s->w;
    }
}

static ff_status alloc_read(void **out, size_t elem, int64_t loc, const char *name, ff_h5_type t, const ff_shape *s,
                            int64_t n) {
    int rank;
    int64_t dims[4];
    shape_dims(s, n, &rank, dims);
    size_t numel = (size_t)(n * ff_shape_numel(*s));
    *out = malloc(numel * elem);  // shape known from the model, not from the file
    if (!*out) return FF_FAIL(FF_ERR_OOM, "golden dataset '%s': cannot allocate %zu bytes", name, numel * elem);
    return ff_h5_read(*out, loc, name, t, rank, dims);
}

// Reads a float32 tensor and checks it against its recorded FNV-1a digest (attribute fnv1a64).
static ff_status read_f32_checked(float **out, uint64_t *digest, int64_t loc, const char *name, const ff_shape *s,
                                  int64_t n) {
    FF_TRY(alloc_read((void **)out, sizeof(float), loc, name, FF_H5_F32, s, n));
    uint64_t want;
    FF_TRY(attr_hex(&want, loc, name, "fnv1a64"));
    uint64_t got = ff_digest_f32(*out, (size_t)(n * ff_shape_numel(*s)));
    if (got != want) {
        char a[17], b[17];
        return FF_FAIL(FF_ERR_INTEGRITY, "golden dataset '%s' has digest %s: its attribute records %s", name,
                       ff_digest_hex(a, got), ff_digest_hex(b, want));
    }
    if (digest) *digest = got;
    return FF_OK;
}

static bool is_exact_op(ff_op op) {
    return op == FF_OP_RELU || op == FF_OP_MAXPOOL || op == FF_OP_FLATTEN;
}

static ff_status load_classes(ff_golden *g, const ff_model *m) {
    const hid_t f = (hid_t)g->file;
    if (!ff_h5_exists(g->file, "expected")) return FF_OK;
    hid_t ex = H5Gopen2(f, "expected", H5P_DEFAULT);
    if (ex < 0) return FF_FAIL(FF_ERR_INPUT, "'/expected' is not a group: expected one group per digest class");
    H5G_info_t info;
    ff_status st = FF_OK;
    if (H5Gget_info(ex, &info) < 0) {
        H5Gclose(ex);
        return FF_FAIL(FF_ERR_HDF5, "cannot list the groups of '/expected'");
    }
    if (info.nlinks > FF_GOLDEN_MAX_CLASSES) {
        H5Gclose(ex);
        return FF_FAIL(FF_ERR_INPUT, "'/expected' holds %llu digest classes: expected at most %d",
                       (unsigned long long)info.nlinks, FF_GOLDEN_MAX_CLASSES);
    }
    for (hsize_t k = 0; k < info.nlinks && st == FF_OK; k++) {
        char name[2 * FF_DIGEST_CLASS_MAX];
        ssize_t len = H5Lget_name_by_idx(ex, ".", H5_INDEX_NAME, H5_ITER_INC, k, name, sizeof name, H5P_DEFAULT);
        if (len < 0) {
            st = FF_FAIL(FF_ERR_HDF5, "cannot read the name of group %llu of '/expected'", (unsigned long long)k);
            break;
        }
        if (len >= FF_DIGEST_CLASS_MAX) {  // longer than any class name (the name printed may be cut short)
            st = FF_FAIL(FF_ERR_INPUT, "'/expected/%s...': a digest class name longer than %d characters", name,
                         FF_DIGEST_CLASS_MAX - 1);
            break;
        }
        if ((st = ff_digest_class_check(name)) != FF_OK) break;
        ff_golden_class *c = &g->classes[g->n_classes++];
        memcpy(c->name, name, (size_t)len + 1);
        char obj[FF_DIGEST_CLASS_MAX + 16];
        snprintf(obj, sizeof obj, "expected/%s", c->name);
        for (int s = 0; s < FF_GOLDEN_N_SLOTS && st == FF_OK; s++) {
            const char *an = slot_attr(m, s);
            if (!an || H5Aexists_by_name(f, obj, an, H5P_DEFAULT) <= 0) continue;
            st = attr_hex(&c->digest[s], g->file, obj, an);
            c->has[s] = st == FF_OK;
        }
    }
    H5Gclose(ex);
    return st;
}

static ff_status load_body(ff_golden *g, const ff_model *m) {
    int64_t f = g->file;
    FF_TRY(ff_h5_read_attr_i64(&g->format_version, f, "meta", "format_version"));
    if (g->format_version != FF_GOLDEN_FORMAT_VERSION)
        return FF_FAIL(FF_ERR_INPUT, "golden format_version %lld: expected %d (regenerate with golden/make_golden.py)",
                       (long long)g->format_version, FF_GOLDEN_FORMAT_VERSION);
    FF_TRY(ff_h5_read_attr_str(g->model, sizeof g->model, f, "meta", "model"));
    if (strcmp(g->model, m->name) != 0)
        return FF_FAIL(FF_ERR_INPUT, "golden is for model '%s': expected '%s'", g->model, m->name);
    char kind[32];
    FF_TRY(ff_h5_read_attr_str(kind, sizeof kind, f, "meta", "kind"));
    if (strcmp(kind, "infer") != 0) return FF_FAIL(FF_ERR_INPUT, "golden kind '%s': expected 'infer'", kind);
    FF_TRY(ff_h5_read_attr_str(g->weights_source, sizeof g->weights_source, f, "meta", "weights_source"));
    int64_t seed;
    FF_TRY(ff_h5_read_attr_i64(&seed, f, "meta", "seed"));
    g->seed = (uint64_t)seed;
    if (ff_h5_read_attr_str(g->generator, sizeof g->generator, f, "meta", "generator") != FF_OK) g->generator[0] = 0;
    if (ff_h5_read_attr_str(g->torch_version, sizeof g->torch_version, f, "meta", "torch_version") != FF_OK)
        g->torch_version[0] = 0;
    if (ff_h5_read_attr_str(g->created, sizeof g->created, f, "meta", "created") != FF_OK) g->created[0] = 0;
    ff_clear_error();

    // The batch size comes from the file: validate it before it sizes anything.
    int rank;
    int64_t dims[FF_H5_MAX_RANK];
    FF_TRY(ff_h5_shape(&rank, dims, f, "input"));
    // A flat input (the MLPs: (C, 1, 1)) is stored (n, C), as every flat tensor (shape_dims).
    if (rank == 2 && m->input.h == 1 && m->input.w == 1) {
        rank = 4;
        dims[2] = dims[3] = 1;
    }
    if (rank != 4 || dims[1] != m->input.c || dims[2] != m->input.h || dims[3] != m->input.w || dims[0] < 1 ||
        dims[0] > MAX_IMAGES)
        return FF_FAIL(FF_ERR_INPUT,
                       "golden 'input' has rank %d, shape (%lld, %lld, %lld, %lld): expected "
                       "(1..%d, %lld, %lld, %lld)",
                       rank, (long long)dims[0], (long long)(rank > 1 ? dims[1] : 0),
                       (long long)(rank > 2 ? dims[2] : 0), (long long)(rank > 3 ? dims[3] : 0), MAX_IMAGES,
                       (long long)m->input.c, (long long)m->input.h, (long long)m->input.w);
    g->n = dims[0];
    FF_TRY(read_f32_checked(&g->input, NULL, f, "input", &m->input, g->n));

    g->n_layers = m->n_layers;
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        ff_golden_layer *gl = &g->layers[i];
        char name[160];
        snprintf(name, sizeof name, "layers/%s/in_f32", L->name);
        FF_TRY(alloc_read((void **)&gl->in_f32, sizeof(float), f, name, FF_H5_F32, &L->in, g->n));
        snprintf(name, sizeof name, "layers/%s/out_f32", L->name);
        FF_TRY(read_f32_checked(&gl->out_f32, &gl->out_digest, f, name, &L->out, g->n));
        size_t count = (size_t)(g->n * ff_shape_numel(L->out));
        if (is_exact_op(L->op)) {
            gl->out_f64 = malloc(count * sizeof(double));
            if (!gl->out_f64) return FF_FAIL(FF_ERR_OOM, "golden: %zu doubles", count);
            for (size_t k = 0; k < count; k++) gl->out_f64[k] = gl->out_f32[k];
            continue;
        }
        snprintf(name, sizeof name, "layers/%s/out_f64", L->name);
        if (ff_h5_exists(f, name)) {
            FF_TRY(alloc_read((void **)&gl->out_f64, sizeof(double), f, name, FF_H5_F64, &L->out, g->n));
            continue;
        }
        // out_f64 = double(out_f32) + double(out_f64_delta) (README: layout)
        snprintf(name, sizeof name, "layers/%s/out_f64_delta", L->name);
        float *delta = NULL;
        ff_status st = read_f32_checked(&delta, NULL, f, name, &L->out, g->n);
        if (st != FF_OK) {
            free(delta);
            return st;
        }
        gl->out_f64 = malloc(count * sizeof(double));
        if (!gl->out_f64) {
            free(delta);
            return FF_FAIL(FF_ERR_OOM, "golden: %zu doubles", count);
        }
        for (size_t k = 0; k < count; k++) gl->out_f64[k] = (double)gl->out_f32[k] + (double)delta[k];
        free(delta);
    }

    char lname[64];
    FF_TRY(ff_h5_read_attr_str(lname, sizeof lname, f, "/", "logits_layer"));
    g->logits_layer = ff_model_find_layer(m, lname);
    if (g->logits_layer < 0 || m->layers[g->logits_layer].op != FF_OP_LINEAR)
        return FF_FAIL(FF_ERR_INPUT, "golden logits_layer '%s': expected a linear layer of %s", lname, m->name);
    const ff_shape *ls = &m->layers[g->logits_layer].out;
    const ff_shape *os = &m->layers[m->n_layers - 1].out;
    FF_TRY(alloc_read((void **)&g->logits_f64, sizeof(double), f, "logits_f64", FF_H5_F64, ls, g->n));
    FF_TRY(alloc_read((void **)&g->probs_f64, sizeof(double), f, "probs_f64", FF_H5_F64, os, g->n));
    ff_shape s5 = {5, 1, 1};
    if (ff_shape_numel(*os) < 5) return FF_FAIL(FF_ERR_INPUT, "model %s has fewer than 5 classes", m->name);
    FF_TRY(alloc_read((void **)&g->top5, sizeof(int64_t), f, "top5", FF_H5_I64, &s5, g->n));
    for (int64_t k = 0; k < g->n * 5; k++)
        if (g->top5[k] < 0 || g->top5[k] >= ff_shape_numel(*ls))
            return FF_FAIL(FF_ERR_INPUT, "golden top5[%lld] = %lld: expected a class in 0..%lld", (long long)k,
                           (long long)g->top5[k], (long long)ff_shape_numel(*ls) - 1);

    // Weight digests (and whether the weights themselves are stored).
    FF_TRY(attr_hex(&g->weights_digest, f, "weights", "fnv1a64"));
    int64_t stored = 0;
    FF_TRY(ff_h5_read_attr_i64(&stored, f, "weights", "stored"));
    g->weights_stored = stored != 0;
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        if (!L->n_weight) continue;
        char obj[96];
        snprintf(obj, sizeof obj, "weights/%s", L->name);
        FF_TRY(attr_hex(&g->w_digest[i], f, obj, "w_fnv1a64"));
        FF_TRY(attr_hex(&g->b_digest[i], f, obj, "b_fnv1a64"));
    }

    // Recorded digests (optional: absent until `verify --record`): every group of /expected is a
    // digest class; its attributes named after a layer or an end-to-end output are that slot's.
    return load_classes(g, m);
}

ff_status ff_golden_load(ff_golden *g, const ff_model *m, const char *path, const ff_golden_options *o) {
    memset(g, 0, sizeof *g);
    g->file = -1;
    snprintf(g->path, sizeof g->path, "%s", path);
    uint8_t *buf = NULL;
    size_t size = 0;
    FF_TRY(read_whole(&buf, &size, path));
    uint8_t dg[32];
    ff_sha256(dg, buf, size);
    ff_sha256_hex(g->sha256, dg);

    // Integrity before HDF5 sees a byte.
    char manifest[1100];
    if (o && o->manifest)
        snprintf(manifest, sizeof manifest, "%s", o->manifest);
    else
        ff_manifest_default(manifest, sizeof manifest, path);
    char want[65];
    ff_status st = ff_manifest_lookup(want, manifest, path);
    if (st != FF_OK) {
        if (!(o && o->trust)) {
            free(buf);
            return st;
        }
        ff_clear_error();
        g->trusted = true;
    } else if (strcmp(want, g->sha256) != 0) {
        free(buf);
        return FF_FAIL(FF_ERR_INTEGRITY,
                       "golden '%s' has SHA-256 %s: %s lists %s (file modified or corrupted; "
                       "regenerate with golden/make_golden.py, or pass --trust for your own file)",
                       path, g->sha256, manifest, want);
    }
    st = open_image(&g->file, buf, size, path);  // its messages name the file already
    free(buf);                                   // H5Pset_file_image copied it
    if (st != FF_OK) {
        ff_golden_free(g);
        return st;
    }
    st = load_body(g, m);
    if (st != FF_OK) {
        ff_status s2 = ff_fail_context(st, "golden '%s'", path);
        ff_golden_free(g);
        return s2;
    }
    return FF_OK;
}

void ff_golden_free(ff_golden *g) {
    free(g->input);
    for (int i = 0; i < FF_MAX_LAYERS; i++) {
        free(g->layers[i].in_f32);
        free(g->layers[i].out_f32);
        free(g->layers[i].out_f64);
    }
    free(g->logits_f64);
    free(g->probs_f64);
    free(g->top5);
    if (g->file > 0) H5Fclose((hid_t)g->file);
    memset(g, 0, sizeof *g);
    g->file = -1;
}

// Whether the pieces lie back to back in layer order over all of wt->data (ff_weights_alloc's
// layout), so that the whole buffer's digest is the pieces' bytes chained.
static bool weights_contiguous(const ff_model *m, const ff_weights *wt) {
    const float *next = wt->data;
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        if (!L->n_weight) continue;
        if (wt->w[i] != next || wt->b[i] != wt->w[i] + L->n_weight) return false;
        next = wt->b[i] + L->n_bias;
    }
    return next == wt->data + wt->n_total;
}

ff_status ff_golden_check_weights(const ff_golden *g, const ff_model *m, const ff_weights *wt) {
    char a[17], b[17];
    // In ff_weights_alloc's layout the whole buffer's digest is chained over the pieces in the
    // same pass as the pieces' own (AlexNet: one read of 244 MB instead of two).
    const bool chained = weights_contiguous(m, wt);
    uint64_t all = FF_FNV_OFFSET;
    for (int i = 0; i < m->n_layers; i++) {
        const ff_layer *L = &m->layers[i];
        if (!L->n_weight) continue;
        uint64_t dw = chained ? ff_digest_f32_piece(&all, wt->w[i], (size_t)L->n_weight)
                              : ff_digest_f32(wt->w[i], (size_t)L->n_weight);
        if (dw != g->w_digest[i])
            return FF_FAIL(FF_ERR_INTEGRITY, "weights of %s: digest %s, the golden records %s (%s)", L->name,
                           ff_digest_hex(a, dw), ff_digest_hex(b, g->w_digest[i]),
                           g->weights_stored ? "stored weights corrupted" : "the C and Python generators disagree");
        uint64_t db = chained ? ff_digest_f32_piece(&all, wt->b[i], (size_t)L->n_bias)
                              : ff_digest_f32(wt->b[i], (size_t)L->n_bias);
        if (db != g->b_digest[i])
            return FF_FAIL(FF_ERR_INTEGRITY, "bias of %s: digest %s, the golden records %s", L->name,
                           ff_digest_hex(a, db), ff_digest_hex(b, g->b_digest[i]));
    }
    if (!chained) all = ff_weights_digest(wt);
    if (all != g->weights_digest)
        return FF_FAIL(FF_ERR_INTEGRITY, "weights digest %s: the golden records %s", ff_digest_hex(a, all),
                       ff_digest_hex(b, g->weights_digest));
    return FF_OK;
}

ff_status ff_golden_weights(ff_weights *wt, const ff_golden *g, const ff_model *m) {
    if (g->weights_stored) {
        ff_status st = ff_weights_read_group(wt, m, g->file);
        if (st != FF_OK) return ff_fail_context(st, "golden '%s' weights", g->path);
    } else if (strcmp(g->weights_source, "generator") == 0) {
        ff_weights_generate(wt, m, g->seed);
    } else {
        return FF_FAIL(FF_ERR_INPUT, "golden '%s' has weights from '%s' but does not store them", g->path,
                       g->weights_source);
    }
    return ff_golden_check_weights(g, m, wt);
}

ff_status ff_golden_record(const ff_golden *g, const ff_model *m, const char *cls, const uint64_t *digests,
                           const bool *set, const char *manifest, int *changed) {
    *changed = 0;
    FF_TRY(ff_digest_class_check(cls));
    const ff_golden_class *rec = ff_golden_find_class(g, cls);  // NULL: a class new to this golden
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(g->path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) return FF_FAIL(FF_ERR_IO, "cannot open golden '%s' for writing (--record)", g->path);
    char obj[FF_DIGEST_CLASS_MAX + 16];
    snprintf(obj, sizeof obj, "expected/%s", cls);
    ff_status st = FF_OK;
    for (int s = 0; s < FF_GOLDEN_N_SLOTS && st == FF_OK; s++) {
        const char *an = slot_attr(m, s);
        if (!set[s] || !an) continue;
        bool had = rec && rec->has[s];
        if (had && rec->digest[s] == digests[s]) continue;
        char hx[17], old[17];
        ff_digest_hex(hx, digests[s]);
        st = ff_h5_write_attr_str((int64_t)f, obj, an, hx);
        if (st == FF_OK) {
            printf("record: %s %s/%s: %s -> %s\n", g->model, obj, an,
                   had ? ff_digest_hex(old, rec->digest[s]) : "(none)", hx);
            (*changed)++;
        }
    }
    if (H5Fclose(f) < 0 && st == FF_OK) st = FF_FAIL(FF_ERR_IO, "closing golden '%s' after --record failed", g->path);
    if (st != FF_OK || *changed == 0) return st;
    if (g->trusted) {
        printf("record: %s is not in a manifest (--trust): manifest not updated\n", g->path);
        return FF_OK;
    }
    char mf[1100], oldh[65], newh[65];
    if (manifest)
        snprintf(mf, sizeof mf, "%s", manifest);
    else
        ff_manifest_default(mf, sizeof mf, g->path);
    FF_TRY(ff_manifest_update(mf, g->path, oldh, newh));
    printf("record: %s: SHA-256 %s -> %s\n", mf, oldh[0] ? oldh : "(none)", newh);
    return FF_OK;
}
