// Guard regions (docs/ARCHITECTURE.md §11): canary floats before and after the part of a buffer in use, checked
// after each exchange or unpack, catch out-of-bounds writes that a value check would miss (a halo
// copied one row too far lands in the guard, not in a neighbour's data). Used by the multi-rank
// modes' halo and staging buffers. A buffer may live on a device (dev set before the first
// reserve): its canaries are then written with an upload and checked with a download.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "fivefold/status.h"

struct ff_device;

#ifdef __cplusplus
extern "C" {
#endif

#define FF_GUARD_FLOATS 16
// Canaries are quiet NaNs whose payload depends on the buffer and the position, so that a guard
// copied from another buffer's guard (an overrun reading past one buffer into another) still
// shows as damage.

// A growable float buffer with FF_GUARD_FLOATS canaries before it and after the part in use.
typedef struct {
    float *base;            // FF_GUARD_FLOATS + cap + FF_GUARD_FLOATS floats
    size_t cap;             // usable floats
    const char *name;       // for messages
    uint32_t key;           // canary payload seed, from the allocation's address
    struct ff_device *dev;  // NULL or a host-memory device: malloc; else that device's memory
} ff_guarded;

static inline float *ff_guarded_data(const ff_guarded *g) {
    return g->base ? g->base + FF_GUARD_FLOATS : NULL;
}
// Makes room for `floats` (keeps nothing); arms the front guard.
ff_status ff_guarded_reserve(ff_guarded *g, size_t floats);
// Arms the back guard right after the first `used` floats (used <= cap). On a device this is an
// upload, which can fail.
ff_status ff_guarded_arm(ff_guarded *g, size_t used);
// Checks both guards; FF_ERR_INTERNAL naming the buffer, `when` and `where`, and the offset hit.
ff_status ff_guarded_check(const ff_guarded *g, size_t used, const char *when, const char *where);
void ff_guarded_free(ff_guarded *g);

#ifdef __cplusplus
}
#endif
