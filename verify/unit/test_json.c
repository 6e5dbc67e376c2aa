// The JSON writer produces exactly the text result files rely on (escaping, nesting, nulls).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "fivefold/json.h"

static void writes_nested_compact_json(void **state) {
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ff_json j;
    ff_json_init(&j, f);
    j.pretty = false;
    ff_json_begin_object(&j, NULL);
    ff_json_str(&j, "schema", "fivefold-bench/1");
    ff_json_str(&j, "quote", "a\"b\\c\n\x01");
    ff_json_int(&j, "n", -42);
    ff_json_num(&j, "ms", 1.5);
    ff_json_num(&j, "nan", NAN);
    ff_json_bool(&j, "ok", true);
    ff_json_str(&j, "none", NULL);
    ff_json_begin_array(&j, "xs");
    ff_json_int(&j, NULL, 1);
    ff_json_begin_object(&j, NULL);
    ff_json_end_object(&j);
    ff_json_begin_array(&j, NULL);
    ff_json_end_array(&j);
    ff_json_end_array(&j);
    ff_json_end_object(&j);
    fclose(f);
    assert_string_equal(buf,
                        "{\"schema\":\"fivefold-bench/1\",\"quote\":\"a\\\"b\\\\c\\n\\u0001\",\"n\":-42,"
                        "\"ms\":1.5,\"nan\":null,\"ok\":true,\"none\":null,\"xs\":[1,{},[]]}\n");
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(writes_nested_compact_json)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
