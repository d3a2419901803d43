/* sample-structured's grammar engine: the regex, choice, GBNF and JSON
 * Schema compilers checked on accepted and refused strings, token masks
 * checked against a brute-force walk of every token, and hostile inputs
 * refused or bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "constraint.h"
#include "vocab.h"

/* Whether the whole of s is a complete string of c's language. */
static bool accepts(ss_compiled *c, const char *s)
{
    int32_t d = ss_pda_start(&c->pda);
    for (size_t i = 0; s[i] && d >= 0; i++)
        d = ss_pda_step(&c->pda, d, (uint8_t)s[i]);
    return d >= 0 && c->pda.ds[d].accepting;
}

static ss_compiled *compile_ok(ss_kind k, const char *text)
{
    ss_compiled *c = NULL;
    plume_error err = {0};
    int rc = ss_compile(k, text, strlen(text), &c, &err);
    if (rc)
        fprintf(stderr, "compile failed: %s\n", err.msg);
    assert_int_equal(rc, 0);
    return c;
}

static void refused(ss_kind k, const char *text, const char *needle)
{
    ss_compiled *c = NULL;
    plume_error err = {0};
    int rc = ss_compile(k, text, strlen(text), &c, &err);
    if (rc == 0 || !strstr(err.msg, needle))
        fprintf(stderr, "expected a refusal naming '%s', got rc %d: %s\n", needle, rc, err.msg);
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(err.msg, needle));
    assert_null(strchr(err.msg, '\n')); /* one line */
}

/* A language (kind and source) with strings in it and strings not in it
 * (each list ends at its first NULL). */
typedef struct lang_case {
    ss_kind kind;
    const char *text;
    const char *in[8], *out[12];
} lang_case;

/* Compiles each of the n cases and checks that it accepts every string of
 * in and none of out; a miss fails naming the string and the language. */
static void check_languages(const lang_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const lang_case *lc = &cases[i];
        ss_compiled *c = compile_ok(lc->kind, lc->text);
        for (size_t j = 0; j < sizeof lc->in / sizeof *lc->in && lc->in[j]; j++)
            if (!accepts(c, lc->in[j]))
                fail_msg("%s refuses %s", lc->text, lc->in[j]);
        for (size_t j = 0; j < sizeof lc->out / sizeof *lc->out && lc->out[j]; j++)
            if (accepts(c, lc->out[j]))
                fail_msg("%s accepts %s", lc->text, lc->out[j]);
        ss_compiled_free(c);
    }
}

static void test_regex(void **state)
{
    (void)state;
    static const lang_case cases[] = {
        {SS_REGEX, "^[a-z]+@[a-z]+\\.(com|org)$", {"bob@example.com", "a@b.org"},
         {"bob@example.net", "@example.com", "bob@example.com "}},
        {SS_REGEX, "\\d{3}-\\d{2,4}(x\\w*)?", {"123-45", "123-4567xab_1"}, {"123-45678", "12-45"}},
        {SS_REGEX, "[^abc]\\.é+", {"z.éé", "ü.é"}, {"a.é"}},
        /* "." is one well-formed UTF-8 character (RFC 3629): not an overlong
         * form, a surrogate or a code point above U+10FFFF */
        {SS_REGEX, "^.$",
         {"a", "\xC2\x80", "\xE0\xA0\x80", "\xED\x9F\xBF", "\xEF\xBF\xBF",
          "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF"},
         {"\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF", "\xED\xA0\x80",
          "\xED\xBF\xBF", "\xF0\x80\x80\x80", "\xF0\x8F\xBF\xBF", "\xF4\x90\x80\x80",
          "\xF5\x80\x80\x80", "\x80", "\xE1\x80"}},
        {SS_JSON_SCHEMA, "{\"type\":\"string\"}", {"\"\xE2\x82\xAC\"", "\"\xF0\x9F\x98\x80\""},
         {"\"\xED\xA0\x80\"", "\"\xE0\x80\xAF\"", "\"\xF4\x90\x80\x80\""}},
    };
    check_languages(cases, sizeof cases / sizeof *cases);
    refused(SS_REGEX, "(a)\\1", "backreferences");
    refused(SS_REGEX, "(?=a)b", "lookaround");
    refused(SS_REGEX, "a{2000}", "1000");
    refused(SS_REGEX, "a(b", "')'");
    refused(SS_REGEX, "[ä]", "non-ASCII");
}

static void test_catastrophic_regex_is_linear(void **state)
{
    (void)state;
    const char *pats[] = {"(a*)*b", "(a|a)*b", "(a+)+$", "((a*)*)*c", "(a|aa)*(b|c)"};
    static char input[20001];
    memset(input, 'a', 20000);
    for (size_t i = 0; i < sizeof pats / sizeof *pats; i++) {
        ss_compiled *c = compile_ok(SS_REGEX, pats[i]);
        int32_t d = ss_pda_start(&c->pda);
        for (int k = 0; k < 20000 && d >= 0; k++)
            d = ss_pda_step(&c->pda, d, 'a');
        assert_true(d >= 0); /* still alive, and it took linear time */
        ss_compiled_free(c);
    }
}

static void test_choice_and_gbnf(void **state)
{
    (void)state;
    static const lang_case cases[] = {
        {SS_CHOICE, "[\"yes\", \"no\", \"yesterday\", \"\\u00e9t\\u00e9\"]",
         {"yes", "yesterday", "no", "été"}, {"ye", "nope"}},
        {SS_GRAMMAR,
         "root ::= greeting \" \" name ( \"!\" )?\n"
         "greeting ::= \"hi\" | \"hello\"  # comment\n"
         "name ::= [A-Z] [a-z]{1,8}\n",
         {"hi Bob", "hello Alice!"}, {"hey Bob", "hi bob"}},
    };
    check_languages(cases, sizeof cases / sizeof *cases);
    refused(SS_CHOICE, "[]", "empty");
    refused(SS_CHOICE, "[1]", "not a string");
    refused(SS_GRAMMAR, "root ::= root \"a\" | \"b\"\n", "left-recursive");
    refused(SS_GRAMMAR, "root ::= foo\n", "never defined");
    refused(SS_GRAMMAR, "start ::= \"a\"\n", "root");
}

static const char person[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"maxLength\":5},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},"
    "\"role\":{\"enum\":[\"admin\",\"user\",null]},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":1,\"maxItems\":2},"
    "\"score\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1}},"
    "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}";

/* An object schema into buf: n_props integer properties p0.., and a
 * required list of n_req names <req>0.. (p: the properties themselves). */
static void object_schema(char *buf, int n_props, char req, int n_req)
{
    char *p = buf + sprintf(buf, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < n_props; i++)
        p += sprintf(p, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
    p += sprintf(p, "},\"required\":[");
    for (int i = 0; i < n_req; i++)
        p += sprintf(p, "%s\"%c%d\"", i ? "," : "", req, i);
    sprintf(p, "]}");
}

static void test_json_schema(void **state)
{
    (void)state;
    static const lang_case cases[] = {
        {SS_JSON_SCHEMA, person,
         {"{\"name\":\"Bob\",\"age\":42}", "{ \"name\": \"Bob\", \"age\": 0, \"role\": null }",
          "{\"name\":\"Al\",\"age\":120,\"tags\":[\"x\",\"y\"],\"score\":0.5}",
          "{\"name\":\"Al\",\"age\":7,\"score\":1}",
          "{\n  \"name\": \"A\\\"b\",\n  \"age\": 99\n}"},
         {"{\"name\":\"Bob\"}",                    /* age required */
          "{\"name\":\"Bobbyy\",\"age\":1}",        /* maxLength */
          "{\"name\":\"B\",\"age\":121}",           /* maximum */
          "{\"name\":\"B\",\"age\":-1}",            /* minimum */
          "{\"name\":\"B\",\"age\":01}",            /* leading zero */
          "{\"name\":\"B\",\"age\":1,\"tags\":[]}", /* minItems */
          "{\"name\":\"B\",\"age\":1,\"tags\":[\"a\",\"b\",\"c\"]}",
          "{\"name\":\"B\",\"age\":1,\"role\":\"root\"}",
          "{\"name\":\"B\",\"age\":1,\"score\":1.5}",
          "{\"name\":\"B\",\"age\":1,\"x\":1}"}}, /* no extras */
        {SS_JSON_SCHEMA,
         "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{"
         "\"v\":{\"type\":\"integer\",\"minimum\":-5,\"exclusiveMaximum\":10},"
         "\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},"
         "\"required\":[\"v\",\"next\"]}},\"$ref\":\"#/$defs/node\"}",
         {"{\"v\":-5,\"next\":{\"v\":9,\"next\":null}}"},
         {"{\"v\":10,\"next\":null}", "{\"v\":-6,\"next\":null}"}},
        {SS_JSON_SCHEMA, "{\"type\":\"string\",\"format\":\"date\"}",
         {"\"2024-02-29\"", "\"2000-02-29\"", "\"2023-04-30\"", "\"0001-01-01\"", "\"1999-12-31\""},
         {"\"2024-13-01\"", "\"2024-02-30\"", "\"2023-02-29\"", "\"1900-02-29\"", "\"2023-04-31\"",
          "\"0000-01-01\"", "\"2023-06-31\""}},
        {SS_JSON_SCHEMA, "{\"type\":\"string\",\"format\":\"date-time\"}",
         {"\"2024-02-29T23:59:59Z\"", "\"2023-01-31T00:00:00.5+05:30\""},
         {"\"2023-04-31T10:00:00Z\"", "\"2023-01-01T24:00:00Z\"", "\"2023-01-01 10:00:00Z\""}},
        {SS_JSON_SCHEMA, "{\"type\":\"string\",\"format\":\"email\"}",
         {"\"a.b@example.com\"", "\"x+tag@mail.example.org\""},
         {"\"a..b@example.com\"", "\".x@example.com\"", "\"x.@example.com\"", "\"x@-a-.com\"",
          "\"x@example\""}},
        {SS_JSON_SCHEMA, "{\"type\":\"string\",\"format\":\"uri\"}",
         {"\"https://x.com/s?q=1#top\"", "\"http://example.org:8080/a/b\""},
         {"\"http://..\"", "\"https://-x.com\"", "\"x.com\""}},
        {SS_JSON_SCHEMA, "{\"type\":\"string\",\"pattern\":\"^a\\\"b$\"}", {"\"a\\\"b\""}, {NULL}},
        {SS_JSON_SCHEMA,
         "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},"
         "{\"type\":\"boolean\"}],\"items\":false}",
         {"[1,true]", "[1]", "[]"}, {"[1,true,3]"}},
        {SS_JSON_OBJECT, "", {"{\"a\":[1,{\"b\":null}],\"c\":\"d\"}"}, {"[1]"}},
        /* an upper bound alone leaves every negative number in */
        {SS_JSON_SCHEMA, "{\"type\":\"number\",\"maximum\":100}",
         {"-5", "-0.25", "-123456.5", "0", "0.5", "99.9", "100"},
         {"100.5", "101", "-0", "-0.0", "--1"}},
        {SS_JSON_SCHEMA, "{\"type\":\"number\",\"maximum\":0}", {"0", "-1", "-0.001"},
         {"0.1", "1", "-0"}},
        {SS_JSON_SCHEMA, "{\"type\":\"number\",\"exclusiveMaximum\":0}", {"-1", "-0.5"},
         {"0", "-0", "-0.0", "0.5"}},
        {SS_JSON_SCHEMA, "{\"type\":\"number\",\"exclusiveMaximum\":3}", {"-2", "0", "2.99"},
         {"3", "3.5", "-0"}},
        {SS_JSON_SCHEMA, "{\"type\":\"number\",\"minimum\":2}", {"2", "3.5"}, {"-3", "1.9"}},
        /* reals in enum and const as written: the fewest digits that read back */
        {SS_JSON_SCHEMA, "{\"enum\":[0.1,0.2,100.0,1e300,-2.5]}", {"0.1", "0.2", "100.0", "1e300", "-2.5"},
         {"0.10000000000000001", "0.3"}},
        {SS_JSON_SCHEMA, "{\"type\":\"string\",\"const\":\"x\"}", {"\"x\""}, {"\"y\""}},
        /* an e in a string or in true is not an exponent */
        {SS_JSON_SCHEMA, "{\"const\":{\"k\":\"yes\",\"t\":true,\"v\":100.0}}",
         {"{\"k\":\"yes\",\"t\":true,\"v\":100.0}"}, {"{\"k\":\"yes\",\"t\":true,\"v\":1e2}"}},
    };
    check_languages(cases, sizeof cases / sizeof *cases);

    refused(SS_JSON_SCHEMA, "{\"type\":\"object\",\"patternProperties\":{}}", "patternProperties");
    refused(SS_JSON_SCHEMA, "{\"type\":\"object\",\"properties\":{\"a\":{\"not\":{}}}}",
            "#/properties/a: unsupported keyword 'not'");
    refused(SS_JSON_SCHEMA, "{\"type\":\"array\",\"uniqueItems\":true}", "uniqueItems");
    refused(SS_JSON_SCHEMA, "{\"allOf\":[{},{}]}", "allOf");
    refused(SS_JSON_SCHEMA, "{\"$ref\":\"http://x/y.json\"}", "$ref");
    refused(SS_JSON_SCHEMA, "{\"type\":\"number\",\"minimum\":-1.5}", "minimum");
    refused(SS_JSON_SCHEMA, "{\"type\":\"string\",\"format\":\"color\"}", "color");
    refused(SS_JSON_SCHEMA, "{\"type\":", "not valid JSON");
    /* const and enum decide alone: other keywords beside them are refused */
    refused(SS_JSON_SCHEMA, "{\"type\":\"string\",\"enum\":[\"a\",\"bb\"],\"maxLength\":1}",
            "'maxLength' next to enum");
    refused(SS_JSON_SCHEMA, "{\"const\":5,\"minimum\":6}", "'minimum' next to const");
    refused(SS_JSON_SCHEMA, "{\"type\":\"string\",\"const\":5}",
            "const has no value the schema's type allows");
    /* a required name that no property describes, where no other key may stand */
    refused(SS_JSON_SCHEMA,
            "{\"type\":\"object\",\"properties\":{},\"required\":[\"a\"],"
            "\"additionalProperties\":false}",
            "'a' is required but not in properties");
    /* such a name takes additionalProperties' schema when there is one */
    static const lang_case addl[] = {
        {SS_JSON_SCHEMA,
         "{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"boolean\"}},"
         "\"required\":[\"a\"],\"additionalProperties\":{\"type\":\"integer\"}}",
         {"{\"b\":true,\"a\":3}", "{\"a\":-1}"}, {"{\"a\":\"x\"}", "{\"b\":true}"}},
    };
    check_languages(addl, 1);
    /* OpenAI's strict mode lists every property in required: 200 of them
     * are 200 names, not 400 */
    char *strict = malloc(300 * 64 + 128);
    if (!strict)
        abort();
    object_schema(strict, 200, 'p', 200);
    ss_compiled *c = compile_ok(SS_JSON_SCHEMA, strict);
    ss_compiled_free(c);
    /* 200 properties and 100 more required names: 300 distinct names */
    object_schema(strict, 200, 'q', 100);
    refused(SS_JSON_SCHEMA, strict, "more than 256 properties");
    free(strict);
}

static void test_hostile_schemas(void **state)
{
    (void)state;
    /* deep nesting */
    size_t depth = 200;
    char *deep = malloc(depth * 40 + 64), *p = deep;
    if (!deep)
        abort();
    for (size_t i = 0; i < depth; i++)
        p += sprintf(p, "{\"type\":\"array\",\"items\":");
    p += sprintf(p, "{\"type\":\"integer\"}");
    for (size_t i = 0; i < depth; i++)
        *p++ = '}';
    *p = 0;
    refused(SS_JSON_SCHEMA, deep, "deeper than 64");
    free(deep);
    /* a huge enum */
    char *big = malloc(10000 * 12 + 64);
    if (!big)
        abort();
    p = big + sprintf(big, "{\"enum\":[");
    for (int i = 0; i < 10000; i++)
        p += sprintf(p, "%s\"v%d\"", i ? "," : "", i);
    sprintf(p, "]}");
    refused(SS_JSON_SCHEMA, big, "4096");
    free(big);
    /* a large but allowed enum stays one parse per prefix */
    big = malloc(4000 * 12 + 64);
    if (!big)
        abort();
    p = big + sprintf(big, "{\"enum\":[");
    for (int i = 0; i < 4000; i++)
        p += sprintf(p, "%s\"v%d\"", i ? "," : "", i);
    sprintf(p, "]}");
    ss_compiled *c = compile_ok(SS_JSON_SCHEMA, big);
    assert_true(accepts(c, "\"v3999\""));
    assert_false(accepts(c, "\"v4000\""));
    ss_compiled_free(c);
    free(big);
    /* nested bounds cost their sum, not their product: bounded and allowed */
    c = compile_ok(SS_REGEX, "((((a{1000}){1000}){1000}){1000})");
    ss_compiled_free(c);
    /* a pattern that expands past the grammar's size limit is refused */
    char *wide = malloc(3000 * 7 + 1);
    if (!wide)
        abort();
    for (int i = 0; i < 3000; i++)
        memcpy(wide + 7 * i, "a{1000}", 7);
    wide[3000 * 7] = 0;
    refused(SS_REGEX, wide, "more than");
    free(wide);
    /* a long chain of forward references (nullability found in linear time) */
    char *chain = malloc(4000 * 24 + 64);
    if (!chain)
        abort();
    p = chain + sprintf(chain, "root ::= r0 \"x\"\n");
    for (int i = 0; i < 3999; i++)
        p += sprintf(p, "r%d ::= r%d\n", i, i + 1);
    sprintf(p, "r3999 ::= \"\" | \"y\"\n");
    c = compile_ok(SS_GRAMMAR, chain);
    assert_true(accepts(c, "x"));
    assert_true(accepts(c, "yx"));
    assert_false(accepts(c, "yyx"));
    ss_compiled_free(c);
    /* doubling at every level: exponentially many parse stacks, refused at
     * the automaton's bound instead of running away */
    p = chain + sprintf(chain, "root ::= r0 \"x\"\n");
    for (int i = 0; i < 3999; i++)
        p += sprintf(p, "r%d ::= r%d r%d\n", i, i + 1, i + 1);
    sprintf(p, "r3999 ::= \"\"\n");
    refused(SS_GRAMMAR, chain, "bound");
    free(chain);
    /* a recursive schema with no way out still compiles and is bounded when run */
    c = compile_ok(SS_JSON_SCHEMA, "{\"$defs\":{\"a\":{\"type\":\"array\",\"items\":{\"$ref\":"
                                   "\"#/$defs/a\"},\"minItems\":1}},\"$ref\":\"#/$defs/a\"}");
    int32_t d = ss_pda_start(&c->pda);
    int k = 0;
    for (; k < 100000 && d >= 0; k++)
        d = ss_pda_step(&c->pda, d, '[');
    assert_true(d == -2 || k == 100000); /* either a bound was reported or it kept going */
    ss_compiled_free(c);
}

/* A small vocabulary of JSON-ish pieces: every mask must equal the brute
 * force check of each token against the automaton. */
static void check_masks(ss_compiled *c, const ss_vocab *v, const char *walk)
{
    uint8_t *a = malloc(ss_mask_bytes(v)), *b = malloc(ss_mask_bytes(v));
    int32_t d = ss_pda_start(&c->pda);
    for (size_t i = 0;; i++) {
        assert_int_equal(ss_mask_compute(v, &c->pda, d, a), 0);
        assert_int_equal(ss_mask_brute(v, &c->pda, d, b), 0);
        assert_memory_equal(a, b, ss_mask_bytes(v));
        if (!walk[i])
            break;
        d = ss_pda_step(&c->pda, d, (uint8_t)walk[i]);
        assert_true(d >= 0);
    }
    free(a);
    free(b);
}

static void test_mask_matches_brute_force(void **state)
{
    (void)state;
    static const char *pieces[] = {
        "{", "}", "{\"", "\"", "\":", "\",", ",", ", \"", ":", " ", "\n", "\n  ", "[", "]", "[]",
        "{}", "a", "b", "ab", "name", "\"name", "name\"", "age", "\"age\":", "1", "12", "0", "01",
        "-", "-1", ".", ".5", "e", "e+", "true", "tr", "ue", "false", "null", "nu", "ll", "yes",
        "no", "ye", "s", "x@", "@", "com", ".com", "org", "\\", "\\\"", "é", "\xc3", "\xa9",
        "admin", "user", "ad", "min", "}\n", "]}", "\"}", "\"]", "2", "3", "9", "99", "120", "5"};
    size_t n = sizeof pieces / sizeof *pieces;
    const char **texts = malloc((n + 1) * sizeof *texts);
    uint32_t *lens = malloc((n + 1) * sizeof *lens);
    bool *eog = calloc(n + 1, 1);
    for (size_t i = 0; i < n; i++) {
        texts[i] = pieces[i];
        lens[i] = (uint32_t)strlen(pieces[i]);
    }
    texts[n] = "";
    lens[n] = 0;
    eog[n] = true;
    ss_vocab v;
    plume_error err = {0};
    assert_int_equal(ss_vocab_build_raw(&v, texts, lens, eog, (int32_t)(n + 1), &err), 0);
    ss_compiled *c = compile_ok(SS_JSON_SCHEMA, person);
    check_masks(c, &v, "{\"name\":\"ab\\\"é\", \"age\":120,\"role\":\"admin\",\"tags\":[\"x\"]}");
    ss_compiled_free(c);
    c = compile_ok(SS_REGEX, "[a-z]+@[a-z]+\\.(com|org)");
    check_masks(c, &v, "ab@x.com");
    ss_compiled_free(c);
    c = compile_ok(SS_CHOICE, "[\"yes\",\"no\",\"null\"]");
    check_masks(c, &v, "null");
    ss_compiled_free(c);
    c = compile_ok(SS_JSON_OBJECT, "");
    check_masks(c, &v, "{\"a\": [1, {\"b\": null}], \"c\": -1.5e+3}");
    ss_compiled_free(c);
    /* the cached mask (ss_mask) is the computed one */
    c = compile_ok(SS_JSON_SCHEMA, person);
    int32_t d = ss_pda_start(&c->pda);
    uint8_t *b = malloc(ss_mask_bytes(&v));
    assert_int_equal(ss_mask_brute(&v, &c->pda, d, b), 0);
    const uint8_t *m1 = ss_mask(&v, &c->pda, d);
    assert_non_null(m1);
    assert_memory_equal(m1, b, ss_mask_bytes(&v));
    const uint8_t *m2 = ss_mask(&v, &c->pda, d);
    assert_ptr_equal(m1, m2);
    /* a mask cache of two (evictions every step) and a DFA flush halfway,
     * the walk going on from its stack set, give the same masks */
    c->pda.max_masks = 2;
    const char *walk = "{\"name\":\"ab\", \"age\":12,\"tags\":[\"x\",\"y\"]}";
    for (size_t i = 0; walk[i]; i++) {
        const uint8_t *m = ss_mask(&v, &c->pda, d);
        assert_non_null(m);
        assert_int_equal(ss_mask_brute(&v, &c->pda, d, b), 0);
        assert_memory_equal(m, b, ss_mask_bytes(&v));
        if (i == 10) {
            uint32_t ns;
            const uint32_t *st = ss_pda_stacks(&c->pda, d, &ns);
            uint32_t saved[64];
            assert_true(ns <= 64);
            memcpy(saved, st, ns * sizeof *st);
            uint64_t epoch = c->pda.epoch;
            ss_pda_flush(&c->pda);
            assert_true(c->pda.epoch == epoch + 1);
            d = ss_pda_intern(&c->pda, saved, ns);
            assert_true(d >= 0);
        }
        d = ss_pda_step(&c->pda, d, (uint8_t)walk[i]);
        assert_true(d >= 0);
    }
    assert_true(c->pda.ds[d].accepting);
    free(b);
    ss_compiled_free(c);
    ss_vocab_free(&v);
    free(texts);
    free(lens);
    free(eog);
}

static void test_cache(void **state)
{
    (void)state;
    ss_cache cache = {0};
    plume_error err = {0};
    ss_compiled *a, *b, *c;
    assert_int_equal(ss_cache_get(&cache, SS_REGEX, "a+", 2, &a, &err), 0);
    assert_int_equal(ss_cache_get(&cache, SS_REGEX, "a+", 2, &b, &err), 0);
    assert_ptr_equal(a, b);
    assert_int_equal(ss_cache_get(&cache, SS_CHOICE, "[\"a+\"]", 6, &c, &err), 0);
    assert_ptr_not_equal(a, c);
    assert_int_equal(cache.hits, 1);
    assert_int_not_equal(ss_cache_get(&cache, SS_REGEX, "a(", 2, &c, &err), 0);
    ss_cache_release(&cache, a);
    ss_cache_release(&cache, b);
    for (int i = 0; i < 40; i++) { /* past the cache's size: unused entries are dropped */
        char re[16];
        int n = snprintf(re, sizeof re, "x{%d}", i + 1);
        assert_int_equal(ss_cache_get(&cache, SS_REGEX, re, (size_t)n, &a, &err), 0);
        ss_cache_release(&cache, a);
    }
    assert_true(cache.n <= SS_CACHE_MAX);
    ss_cache_free(&cache);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regex),
        cmocka_unit_test(test_catastrophic_regex_is_linear),
        cmocka_unit_test(test_choice_and_gbnf),
        cmocka_unit_test(test_json_schema),
        cmocka_unit_test(test_hostile_schemas),
        cmocka_unit_test(test_mask_matches_brute_force),
        cmocka_unit_test(test_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
