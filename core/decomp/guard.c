// Guarded buffers (guard.h).
#include "fivefold/guard.h"

#include <stdlib.h>
#include <string.h>

#include "fivefold/device.h"

// Device buffers: canaries go through the device's copies; host buffers are written directly.
static bool on_device(const ff_guarded *g) {
    return g->dev && !ff_device_is_host(g->dev);
}

static uint32_t canary(uint32_t key, size_t i) {
    return 0x7fc00000u | ((key + (uint32_t)i * 0x9E3779B9u) & 0x003fffffu);  // quiet NaN
}

static void fill_canary(uint32_t key, float *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t c = canary(key, i);
        memcpy(&p[i], &c, sizeof c);
    }
}

static ff_status set_canary(const ff_guarded *g, float *p) {
    if (!on_device(g)) {
        fill_canary(g->key, p, FF_GUARD_FLOATS);
        return FF_OK;
    }
    float c[FF_GUARD_FLOATS];
    fill_canary(g->key, c, FF_GUARD_FLOATS);
    FF_TRY(ff_device_upload(g->dev, p, c, FF_GUARD_FLOATS));
    return ff_device_sync(g->dev);  // c lives on this stack frame
}

ff_status ff_guarded_reserve(ff_guarded *g, size_t floats) {
    if (g->base && floats <= g->cap) return FF_OK;
    size_t cap = floats < 1024 ? 1024 : floats;
    size_t bytes = (cap + 2 * FF_GUARD_FLOATS) * sizeof(float);
    float *b = NULL;
    if (on_device(g)) {
        FF_TRY(ff_device_alloc(g->dev, &b, bytes / sizeof(float), g->name ? g->name : "guarded buffer"));
    } else {
        b = malloc(bytes);
        if (!b) return FF_FAIL(FF_ERR_OOM, "%s buffer: %zu bytes", g->name ? g->name : "guarded", bytes);
    }
    ff_guarded_free(g);
    g->base = b;
    g->cap = cap;
    uint64_t a = (uint64_t)(uintptr_t)b;
    g->key = (uint32_t)((a >> 4) ^ (a >> 28)) * 2654435761u;
    FF_TRY(set_canary(g, b));
    return set_canary(g, b + FF_GUARD_FLOATS + cap);
}

ff_status ff_guarded_arm(ff_guarded *g, size_t used) {
    if (g->base && used <= g->cap) return set_canary(g, g->base + FF_GUARD_FLOATS + used);
    return FF_OK;
}

ff_status ff_guarded_check(const ff_guarded *g, size_t used, const char *when, const char *where) {
    if (!g->base) return FF_OK;
    if (used > g->cap)
        return FF_FAIL(FF_ERR_INTERNAL, "%s, %s: %zu floats in use in the %s buffer of %zu", when, where, used,
                       g->name ? g->name : "guarded", g->cap);
    const float *at[2] = {g->base, g->base + FF_GUARD_FLOATS + used};
    float copy[2][FF_GUARD_FLOATS];
    if (on_device(g)) {  // after the device's work up to now has landed
        for (int k = 0; k < 2; k++) FF_TRY(ff_device_download(g->dev, copy[k], at[k], FF_GUARD_FLOATS));
        FF_TRY(ff_device_sync(g->dev));
        at[0] = copy[0];
        at[1] = copy[1];
    }
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < FF_GUARD_FLOATS; i++) {
            uint32_t v;
            memcpy(&v, &at[k][i], sizeof v);
            if (v != canary(g->key, i))
                return FF_FAIL(FF_ERR_INTERNAL,
                               "%s, %s: guard %s the %s buffer (%zu floats in use) overwritten at "
                               "guard offset %zu (0x%08x): an out-of-bounds write",
                               when, where, k == 0 ? "before" : "after", g->name ? g->name : "guarded", used, i, v);
        }
    return FF_OK;
}

void ff_guarded_free(ff_guarded *g) {
    if (on_device(g))
        ff_device_free(g->dev, g->base);
    else
        free(g->base);
    g->base = NULL;
    g->cap = 0;
}
