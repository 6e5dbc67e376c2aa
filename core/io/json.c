// Streaming JSON writer (see json.h).
#include "fivefold/json.h"

#include <math.h>

void ff_json_init(ff_json *j, FILE *f) {
    j->f = f;
    j->depth = 0;
    j->first[0] = true;
    j->pretty = true;
}

static void indent(ff_json *j) {
    if (!j->pretty) return;
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
}

static void escaped(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void key_prefix(ff_json *j, const char *key) {
    if (j->depth > 0) {
        if (!j->first[j->depth]) fputc(',', j->f);
        indent(j);
    }
    j->first[j->depth] = false;
    if (key) {
        escaped(j->f, key);
        fputs(j->pretty ? ": " : ":", j->f);
    }
}

static void open_container(ff_json *j, const char *key, char c) {
    key_prefix(j, key);
    fputc(c, j->f);
    if (j->depth + 1 < FF_JSON_MAX_DEPTH) j->depth++;
    j->first[j->depth] = true;
}

static void close_container(ff_json *j, char c) {
    bool empty = j->first[j->depth];
    if (j->depth > 0) j->depth--;
    if (!empty) indent(j);
    fputc(c, j->f);
    if (j->depth == 0) fputc('\n', j->f);
}

void ff_json_begin_object(ff_json *j, const char *key) {
    open_container(j, key, '{');
}
void ff_json_end_object(ff_json *j) {
    close_container(j, '}');
}
void ff_json_begin_array(ff_json *j, const char *key) {
    open_container(j, key, '[');
}
void ff_json_end_array(ff_json *j) {
    close_container(j, ']');
}

void ff_json_str(ff_json *j, const char *key, const char *value) {
    key_prefix(j, key);
    if (value)
        escaped(j->f, value);
    else
        fputs("null", j->f);
}

void ff_json_int(ff_json *j, const char *key, int64_t value) {
    key_prefix(j, key);
    fprintf(j->f, "%lld", (long long)value);
}

void ff_json_num(ff_json *j, const char *key, double value) {
    key_prefix(j, key);
    if (isfinite(value))
        fprintf(j->f, "%.6g", value);
    else
        fputs("null", j->f);
}

void ff_json_bool(ff_json *j, const char *key, bool value) {
    key_prefix(j, key);
    fputs(value ? "true" : "false", j->f);
}
