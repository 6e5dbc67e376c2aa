// How a multi-rank forward divides its work (docs/ARCHITECTURE.md §1): the name every layer shares —
// the partition (geometry), the decompositions (data movement) and the executor (the mode's
// choice) — kept apart so the geometry needs nothing of the executor.
#pragma once
#include "fivefold/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { FF_SPLIT_NONE, FF_SPLIT_BATCH, FF_SPLIT_ROWS, FF_SPLIT_REPLICATE } ff_split;

// "batch", "rows", "replicate" (and "none"); FF_ERR_INPUT naming the accepted values otherwise.
ff_status ff_split_parse(ff_split *out, const char *s);
const char *ff_split_name(ff_split s);

#ifdef __cplusplus
}
#endif
