/* The Jinja engine's str methods on strings that are not valid UTF-8 (a
 * template's literal can hold any bytes; jinja2 could not even read such a
 * template, so there is nothing to compare with): they must stay inside the
 * string and treat a byte that does not start a well-formed character as a
 * character of its own, from either end.  The first case is the input
 * fuzz_jinja found (strip of a lone continuation byte that counts as a
 * space, 0x85, followed by one that does not, 0x81: the right-hand scan
 * stepped back past the left-hand one, and the copy had size -1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "template/jinja.h"

/* Renders src over an empty context; the output, or NULL on an error. */
static char *render(const char *src)
{
    jinja_template *t = NULL;
    plume_error err = {0};
    assert_int_equal(jinja_compile(src, strlen(src), &t, &err), 0);
    json_t *ctx = json_object();
    jinja_render_opts opts = {.limits = {.max_steps = 10000,
                                         .max_output = 1 << 16,
                                         .max_memory = 1 << 24,
                                         .max_depth = 16,
                                         .max_loop = 1000}};
    char *out = NULL;
    size_t len = 0;
    const int rc = jinja_render(t, ctx, &opts, &out, &len, &err);
    json_decref(ctx);
    jinja_free(t);
    if (rc != 0)
        return NULL;
    assert_int_equal(strlen(out), len);
    return out;
}

static void expect(const char *src, const char *want)
{
    char *out = render(src);
    assert_non_null(out);
    assert_string_equal(out, want);
    free(out);
}

static void test_strip_stays_inside(void **state)
{
    (void)state;
    expect("{{ '\x85\x81'.strip() }}", "\x81");
    expect("{{ '\x85\x81'.rstrip() }}", "\x85\x81");
    expect("{{ '\x85\x81'.lstrip() }}", "\x81");
    expect("{{ '\x81\x85'.rstrip() }}", "\x81");
    expect("{{ '\x85\x85'.strip() }}", "");
    expect("{{ ' \x85\x81 '.strip() }}", "\x81");
    expect("{{ '\x81\x85\x81'.strip('\x81') }}", "\x85");
}

static void test_strip_valid_text(void **state)
{
    (void)state;
    expect("{{ ' \xc2\xa0h\xc3\xa9\xe2\x80\x83 '.strip() }}", "h\xc3\xa9"); /* NBSP, EM SPACE */
    expect("{{ 'xx\xc3\xa9xx'.strip('x') }}", "\xc3\xa9");
    expect("{{ '\xc3\xa9" "a\xc3\xa9'.strip('\xc3\xa9') }}", "a");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strip_stays_inside),
        cmocka_unit_test(test_strip_valid_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
