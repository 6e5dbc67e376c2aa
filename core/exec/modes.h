// Private to core/exec/: the mode table (modes.c).
#pragma once
#include <stdbool.h>

#include "fivefold/executor.h"

typedef struct {
    const char *name, *alias;
    ff_device_kind device;
    bool multirank;   // P ranks over a communicator
    unsigned splits;  // accepted splits: bit (1 << ff_split)
    ff_split default_split;
    bool built;           // false: refused with `missing`
    const char *missing;  // why a mode that is not built cannot run yet
} ff_mode_desc;

const ff_mode_desc *ff_mode_desc_of(ff_mode m);
