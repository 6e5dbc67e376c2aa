// Split names (split.h).
#include "fivefold/split.h"

#include <string.h>

static const char *split_names[] = {"none", "batch", "rows", "replicate"};

ff_status ff_split_parse(ff_split *out, const char *s) {
    for (int i = 0; i < 4; i++) {
        if (s && strcmp(s, split_names[i]) == 0) {
            *out = (ff_split)i;
            return FF_OK;
        }
    }
    return FF_FAIL(FF_ERR_INPUT, "unknown split '%s': expected batch|rows|replicate", s ? s : "(none)");
}

const char *ff_split_name(ff_split s) {
    return (unsigned)s < 4 ? split_names[s] : "?";
}
