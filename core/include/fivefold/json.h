// A small streaming JSON writer for result files (bench, verify --json). Writing only: results are
// read by Python (bench/report.py), never by the library.
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FF_JSON_MAX_DEPTH 16

typedef struct {
    FILE *f;
    int depth;
    bool first[FF_JSON_MAX_DEPTH];  // no element written yet at this depth
    bool pretty;
} ff_json;

void ff_json_init(ff_json *j, FILE *f);
// Containers: pass key = NULL inside arrays and at the top level.
void ff_json_begin_object(ff_json *j, const char *key);
void ff_json_end_object(ff_json *j);
void ff_json_begin_array(ff_json *j, const char *key);
void ff_json_end_array(ff_json *j);
void ff_json_str(ff_json *j, const char *key, const char *value);  // NULL value writes null
void ff_json_int(ff_json *j, const char *key, int64_t value);
void ff_json_num(ff_json *j, const char *key, double value);  // non-finite writes null
void ff_json_bool(ff_json *j, const char *key, bool value);

#ifdef __cplusplus
}
#endif
