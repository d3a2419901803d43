/* Python's str operations (see text.h). */
#include <stdio.h>
#include <string.h>

#include "template/text.h"

unsigned jtext_cp_at(const char *p, size_t n, size_t *len)
{
    const unsigned char *u = (const unsigned char *)p;
    unsigned c = u[0];
    size_t l = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (l > n || (c >= 0x80 && c < 0xC0)) {
        *len = 1;
        return c;
    }
    unsigned cp = l == 1 ? c : l == 2 ? c & 0x1F : l == 3 ? c & 0x0F : c & 0x07;
    for (size_t i = 1; i < l; i++)
        cp = (cp << 6) | (u[i] & 0x3F);
    *len = l;
    return cp;
}

bool jtext_is_space(unsigned cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

size_t jtext_space_at(const char *p, size_t n)
{
    size_t l;
    unsigned cp = jtext_cp_at(p, n, &l);
    return jtext_is_space(cp) ? l : 0;
}

/* Length of the character ending at p + end (end > 0), as jtext_cp_at
 * reads characters forward: a lead byte with its continuation bytes, else
 * (bytes that are not one well-formed character) the last byte alone. */
static size_t cp_before(const char *p, size_t end)
{
    size_t s = end - 1, l;
    while (s > 0 && ((unsigned char)p[s] & 0xC0) == 0x80 && end - s < 4)
        s--;
    jtext_cp_at(p + s, end - s, &l);
    return l == end - s ? l : 1;
}

static bool in_chars(const jstr *chars, const char *p, size_t l)
{
    for (size_t i = 0; i < chars->len;) {
        size_t cl;
        jtext_cp_at(chars->data + i, chars->len - i, &cl);
        if (cl == l && !memcmp(chars->data + i, p, l))
            return true;
        i += cl;
    }
    return false;
}

jv jtext_strip(jrt *rt, const jstr *s, const jstr *chars, char which)
{
    size_t a = 0, b = s->len;
    if (which != 'r')
        while (a < b) {
            size_t l;
            unsigned cp = jtext_cp_at(s->data + a, b - a, &l);
            if (chars ? !in_chars(chars, s->data + a, l) : !jtext_is_space(cp))
                break;
            a += l;
        }
    if (which != 'l')
        while (b > a) {
            /* the character ending at b, looked for inside [a, b) only */
            size_t l = cp_before(s->data + a, b - a), l2;
            unsigned cp = jtext_cp_at(s->data + b - l, l, &l2);
            if (chars ? !in_chars(chars, s->data + b - l, l) : !jtext_is_space(cp))
                break;
            b -= l;
        }
    if (a == 0 && b == s->len)
        return jv_strv(s);
    return jv_str(rt, s->data + a, b - a);
}

/* Simple case mappings for ASCII, Latin-1, Latin Extended-A, Greek and
 * Cyrillic (what Python's str.upper/lower/title do there; other scripts are
 * left as they are, and count as uncased).  Returns the mapped code point;
 * *cased says whether cp is a cased letter. */
static unsigned to_lower_cp(unsigned cp, bool *cased)
{
    *cased = true;
    if (cp >= 'A' && cp <= 'Z')
        return cp + 32;
    if (cp >= 'a' && cp <= 'z')
        return cp;
    if (cp < 0x80) {
        *cased = false;
        return cp;
    }
    if ((cp >= 0xC0 && cp <= 0xDE && cp != 0xD7))
        return cp + 32;
    if ((cp >= 0xDF && cp <= 0xFF && cp != 0xF7) || cp == 0xB5)
        return cp;
    if (cp >= 0x100 && cp <= 0x17F) {
        if (cp == 0x130)
            return 'i'; /* İ -> i (Python gives i + U+0307; close enough for templates) */
        if (cp == 0x131 || cp == 0x138 || cp == 0x149 || cp == 0x17F)
            return cp;
        if (cp == 0x178)
            return 0xFF;
        if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E))
            return (cp & 1) ? cp + 1 : cp;
        return (cp & 1) ? cp : cp + 1;
    }
    if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2)
        return cp + 32;
    if (cp >= 0x3B1 && cp <= 0x3C9)
        return cp;
    if (cp >= 0x410 && cp <= 0x42F)
        return cp + 32;
    if (cp >= 0x400 && cp <= 0x40F)
        return cp + 80;
    if (cp >= 0x430 && cp <= 0x45F)
        return cp;
    *cased = false;
    return cp;
}

static unsigned to_upper_cp(unsigned cp, bool *cased)
{
    *cased = true;
    if (cp >= 'a' && cp <= 'z')
        return cp - 32;
    if (cp >= 'A' && cp <= 'Z')
        return cp;
    if (cp < 0x80) {
        *cased = false;
        return cp;
    }
    if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7)
        return cp - 32;
    if (cp == 0xFF)
        return 0x178;
    if (cp == 0xB5)
        return 0x39C;
    if ((cp >= 0xC0 && cp <= 0xDF && cp != 0xD7))
        return cp; /* 0xDF (ß) is handled by the caller: "SS" */
    if (cp >= 0x100 && cp <= 0x17F) {
        if (cp == 0x131)
            return 'I';
        if (cp == 0x17F)
            return 'S';
        if (cp == 0x130 || cp == 0x138 || cp == 0x149 || cp == 0x178)
            return cp;
        if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E))
            return (cp & 1) ? cp : cp - 1;
        return (cp & 1) ? cp - 1 : cp;
    }
    if (cp == 0x3C2)
        return 0x3A3;
    if (cp >= 0x3B1 && cp <= 0x3C9)
        return cp - 32;
    if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2)
        return cp;
    if (cp >= 0x430 && cp <= 0x44F)
        return cp - 32;
    if (cp >= 0x450 && cp <= 0x45F)
        return cp - 80;
    if (cp >= 0x400 && cp <= 0x42F)
        return cp;
    *cased = false;
    return cp;
}

static void put_cp(jrt *rt, jbuf *b, unsigned cp)
{
    char o[4];
    size_t n;
    if (cp < 0x80) {
        o[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        o[0] = (char)(0xF0 | (cp >> 18));
        o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    jbuf_put(rt, b, o, n);
}

jv jtext_case(jrt *rt, const jstr *s, char how)
{
    jbuf b = {0};
    bool prev_cased = false;
    size_t i = 0, k = 0;
    while (i < s->len) {
        size_t l;
        unsigned cp = jtext_cp_at(s->data + i, s->len - i, &l);
        if (l == 1 && cp >= 0x80) { /* an invalid byte: kept as it is */
            jbuf_put(rt, &b, s->data + i, 1);
            i++;
            k++;
            prev_cased = false;
            continue;
        }
        bool up;
        switch (how) {
        case 'u': up = true; break;
        case 'l': up = false; break;
        case 'c': up = k == 0; break;
        default: up = !prev_cased; break; /* title */
        }
        bool cased;
        if (up) {
            unsigned u = to_upper_cp(cp, &cased);
            if (cp == 0xDF) /* ß: "SS" in upper, "Ss" in title and capitalize */
                jbuf_puts(rt, &b, how == 'u' ? "SS" : "Ss");
            else if (cp == 0x149) /* ŉ: ʼN */
                jbuf_puts(rt, &b, "\xCA\xBCN");
            else
                put_cp(rt, &b, u);
        } else {
            unsigned lo = to_lower_cp(cp, &cased);
            if (cp == 0x3A3) { /* Σ: final sigma at the end of a word */
                size_t l2 = 0;
                bool next_cased = false;
                if (i + l < s->len) {
                    unsigned nx = jtext_cp_at(s->data + i + l, s->len - i - l, &l2);
                    to_lower_cp(nx, &next_cased);
                }
                lo = prev_cased && !next_cased ? 0x3C2 : 0x3C3;
            }
            put_cp(rt, &b, lo);
        }
        prev_cased = cased;
        i += l;
        k++;
    }
    return jbuf_take(rt, &b);
}

jv jtext_title_words(jrt *rt, const jstr *s)
{
    /* jinja2's title filter: the string split at runs of whitespace and
     * -({[<, each piece's first character upper-cased and the rest
     * lower-cased (not Python's str.title) */
    jbuf b = {0};
    size_t i = 0;
    while (i < s->len) {
        size_t l = jtext_space_at(s->data + i, s->len - i);
        if (!l && strchr("-({[<", s->data[i]) && s->data[i])
            l = 1;
        if (l) {
            jbuf_put(rt, &b, s->data + i, l);
            i += l;
            continue;
        }
        size_t j = i;
        while (j < s->len && !jtext_space_at(s->data + j, s->len - j) &&
               !(s->data[j] && strchr("-({[<", s->data[j])))
            j++;
        size_t fl;
        jtext_cp_at(s->data + i, j - i, &fl);
        jv first = jtext_case(rt, jstr_new(rt, s->data + i, fl), 'u');
        jv rest = jtext_case(rt, jstr_new(rt, s->data + i + fl, j - i - fl), 'l');
        jbuf_put(rt, &b, first.u.s->data, first.u.s->len);
        jbuf_put(rt, &b, rest.u.s->data, rest.u.s->len);
        i = j;
    }
    return jbuf_take(rt, &b);
}

jv jtext_replace(jrt *rt, const jstr *s, const jstr *old, const jstr *rep, int64_t count)
{
    jbuf b = {0};
    if (!old->len) {
        /* Python inserts rep between every character and at both ends */
        int64_t done = 0;
        size_t i = 0;
        for (;;) {
            if (count < 0 || done < count) {
                jbuf_put(rt, &b, rep->data, rep->len);
                done++;
            }
            if (i >= s->len)
                break;
            size_t l;
            jtext_cp_at(s->data + i, s->len - i, &l);
            jbuf_put(rt, &b, s->data + i, l);
            i += l;
        }
        return jbuf_take(rt, &b);
    }
    size_t i = 0;
    int64_t done = 0;
    while (i < s->len) {
        if ((count < 0 || done < count) && i + old->len <= s->len &&
            !memcmp(s->data + i, old->data, old->len)) {
            jbuf_put(rt, &b, rep->data, rep->len);
            i += old->len;
            done++;
        } else
            jbuf_putc(rt, &b, s->data[i++]);
    }
    return jbuf_take(rt, &b);
}

jv jtext_split(jrt *rt, const jstr *s, const jstr *sep, int64_t maxsplit, bool from_right)
{
    jv out = jv_list(rt, 0);
    if (sep && !sep->len)
        jrt_fail(rt, PLUME_ERR_INVALID, "empty separator");
    if (sep) {
        if (!from_right) {
            size_t start = 0, i = 0;
            int64_t done = 0;
            while (i + sep->len <= s->len && (maxsplit < 0 || done < maxsplit)) {
                if (!memcmp(s->data + i, sep->data, sep->len)) {
                    jlist_push(rt, out.u.l, jv_str(rt, s->data + start, i - start));
                    i += sep->len;
                    start = i;
                    done++;
                } else
                    i++;
            }
            jlist_push(rt, out.u.l, jv_str(rt, s->data + start, s->len - start));
            return out;
        }
        /* rsplit: collect from the right, then reverse */
        size_t end = s->len;
        int64_t done = 0;
        size_t i = s->len;
        while (i >= sep->len && (maxsplit < 0 || done < maxsplit)) {
            if (!memcmp(s->data + i - sep->len, sep->data, sep->len)) {
                jlist_push(rt, out.u.l, jv_str(rt, s->data + i, end - i));
                i -= sep->len;
                end = i;
                done++;
            } else
                i--;
        }
        jlist_push(rt, out.u.l, jv_str(rt, s->data, end));
        for (size_t a = 0, z = out.u.l->n - 1; a < z; a++, z--) {
            jv t = out.u.l->items[a];
            out.u.l->items[a] = out.u.l->items[z];
            out.u.l->items[z] = t;
        }
        return out;
    }
    /* whitespace runs */
    if (from_right) {
        jv parts = jtext_split(rt, s, NULL, -1, false);
        if (maxsplit < 0 || (size_t)maxsplit + 1 > parts.u.l->n) /* else the head keeps its leading spaces */
            return parts;
        /* rejoin the leftmost parts with the original spacing */
        size_t keep = (size_t)maxsplit;
        size_t i = s->len, found = 0;
        while (found < keep) {
            for (int want_space = 1; want_space >= 0; want_space--) /* spaces, then the word before */
                while (i > 0) {
                    const size_t l = cp_before(s->data, i);
                    if ((jtext_space_at(s->data + i - l, l) != 0) != want_space)
                        break;
                    i -= l;
                }
            found++;
        }
        jv head = jtext_strip(rt, jstr_new(rt, s->data, i), NULL, 'r'); /* Python keeps the leading spaces */
        jlist_push(rt, out.u.l, head);
        for (size_t k = parts.u.l->n - keep; k < parts.u.l->n; k++)
            jlist_push(rt, out.u.l, parts.u.l->items[k]);
        return out;
    }
    size_t i = 0;
    int64_t done = 0;
    for (;;) {
        size_t l;
        while (i < s->len && (l = jtext_space_at(s->data + i, s->len - i)))
            i += l;
        if (i >= s->len)
            break;
        if (maxsplit >= 0 && done >= maxsplit) {
            /* Python keeps the remainder's trailing whitespace */
            jlist_push(rt, out.u.l, jv_str(rt, s->data + i, s->len - i));
            break;
        }
        size_t start = i;
        while (i < s->len && !jtext_space_at(s->data + i, s->len - i)) {
            size_t cl;
            jtext_cp_at(s->data + i, s->len - i, &cl);
            i += cl;
        }
        jlist_push(rt, out.u.l, jv_str(rt, s->data + start, i - start));
        done++;
    }
    return out;
}

jv jtext_splitlines(jrt *rt, const jstr *s)
{
    jv out = jv_list(rt, 0);
    size_t start = 0, i = 0;
    while (i < s->len) {
        unsigned char c = (unsigned char)s->data[i];
        size_t brk = 0;
        if (c == '\r')
            brk = i + 1 < s->len && s->data[i + 1] == '\n' ? 2 : 1;
        else if (c == '\n' || c == '\v' || c == '\f' || c == 0x1C || c == 0x1D || c == 0x1E)
            brk = 1;
        else if (c == 0xC2 && i + 1 < s->len && (unsigned char)s->data[i + 1] == 0x85)
            brk = 2;
        else if (c == 0xE2 && i + 2 < s->len && (unsigned char)s->data[i + 1] == 0x80 &&
                 ((unsigned char)s->data[i + 2] == 0xA8 || (unsigned char)s->data[i + 2] == 0xA9))
            brk = 3;
        if (brk) {
            jlist_push(rt, out.u.l, jv_str(rt, s->data + start, i - start));
            i += brk;
            start = i;
        } else
            i++;
    }
    if (start < s->len)
        jlist_push(rt, out.u.l, jv_str(rt, s->data + start, s->len - start));
    return out;
}

int64_t jtext_find(const jstr *s, const jstr *sub, bool from_right)
{
    if (sub->len > s->len)
        return -1;
    if (!from_right) {
        for (size_t i = 0; i + sub->len <= s->len; i++)
            if (!memcmp(s->data + i, sub->data, sub->len))
                return (int64_t)jutf8_count(s->data, i);
    } else {
        for (size_t i = s->len - sub->len + 1; i-- > 0;)
            if (!memcmp(s->data + i, sub->data, sub->len))
                return (int64_t)jutf8_count(s->data, i);
    }
    return -1;
}

/* One replacement field's value formatted with spec (fill/align/width, d, s, f). */
static void format_field(jrt *rt, jbuf *b, jv v, char conv, const char *spec, size_t speclen)
{
    jbuf t = {0};
    if (conv == 'r')
        jv_write_repr(rt, &t, v);
    else if (speclen && (spec[speclen - 1] == 'f' || spec[speclen - 1] == 'e') &&
             (v.kind == JV_FLOAT || v.kind == JV_INT)) {
        char fmt[40];
        snprintf(fmt, sizeof fmt, "%%%.*s", (int)(speclen < 30 ? speclen : 30), spec);
        jbuf_printf(rt, &t, fmt, v.kind == JV_FLOAT ? v.u.f : (double)v.u.i);
        speclen = 0;
    } else
        jv_write_str(rt, &t, v);
    /* [[fill]align][width][type] */
    char fill = ' ', align = 0;
    size_t k = 0;
    if (speclen >= 2 && strchr("<>^", spec[1])) {
        fill = spec[0];
        align = spec[1];
        k = 2;
    } else if (speclen >= 1 && strchr("<>^", spec[0])) {
        align = spec[0];
        k = 1;
    }
    size_t width = 0;
    while (k < speclen && spec[k] >= '0' && spec[k] <= '9' && width < 100000)
        width = width * 10 + (size_t)(spec[k++] - '0');
    if (k < speclen && !strchr("sd", spec[k]))
        jrt_fail(rt, PLUME_ERR_UNSUPPORTED, "format spec '%.*s' is not supported", (int)speclen,
                 spec);
    size_t len = jutf8_count(t.p ? t.p : "", t.n);
    size_t pad = width > len ? width - len : 0;
    if (!align)
        align = v.kind == JV_INT || v.kind == JV_FLOAT ? '>' : '<';
    size_t left = align == '>' ? pad : align == '^' ? pad / 2 : 0;
    for (size_t i = 0; i < left; i++)
        jbuf_putc(rt, b, fill);
    jbuf_put(rt, b, t.p ? t.p : "", t.n);
    for (size_t i = left; i < pad; i++)
        jbuf_putc(rt, b, fill);
}

jv jtext_format(jrt *rt, const jstr *fmt, const jv *args, size_t n, const jstr *const *kwn,
                const jv *kwv, size_t nkw)
{
    jbuf b = {0};
    size_t auto_idx = 0;
    const char *p = fmt->data, *e = fmt->data + fmt->len;
    while (p < e) {
        if (*p == '{' && p + 1 < e && p[1] == '{') {
            jbuf_putc(rt, &b, '{');
            p += 2;
            continue;
        }
        if (*p == '}' && p + 1 < e && p[1] == '}') {
            jbuf_putc(rt, &b, '}');
            p += 2;
            continue;
        }
        if (*p == '}')
            jrt_fail(rt, PLUME_ERR_INVALID, "single '}' encountered in format string");
        if (*p != '{') {
            jbuf_putc(rt, &b, *p++);
            continue;
        }
        const char *q = ++p;
        while (q < e && *q != '}')
            q++;
        if (q >= e)
            jrt_fail(rt, PLUME_ERR_INVALID, "single '{' encountered in format string");
        const char *name = p, *name_end = p;
        while (name_end < q && *name_end != '!' && *name_end != ':')
            name_end++;
        char conv = 0;
        const char *spec = name_end;
        if (spec < q && *spec == '!') {
            conv = spec + 1 < q ? spec[1] : 0;
            spec += 2;
        }
        if (spec < q && *spec == ':')
            spec++;
        else
            spec = q;
        jv v;
        size_t nl = (size_t)(name_end - name);
        if (!nl) {
            if (auto_idx >= n)
                jrt_fail(rt, PLUME_ERR_INVALID, "Replacement index %zu out of range for "
                                                "positional args tuple", auto_idx);
            v = args[auto_idx++];
        } else if (name[0] >= '0' && name[0] <= '9') {
            size_t idx = 0;
            for (size_t i = 0; i < nl; i++) {
                if (name[i] < '0' || name[i] > '9')
                    jrt_fail(rt, PLUME_ERR_UNSUPPORTED, "format field '%.*s' is not supported",
                             (int)nl, name);
                idx = idx * 10 + (size_t)(name[i] - '0');
                if (idx > n)
                    break;
            }
            if (idx >= n)
                jrt_fail(rt, PLUME_ERR_INVALID, "Replacement index %zu out of range for "
                                                "positional args tuple", idx);
            v = args[idx];
        } else {
            size_t k = 0;
            while (k < nkw && !(kwn[k]->len == nl && !memcmp(kwn[k]->data, name, nl)))
                k++;
            if (k == nkw)
                jrt_fail(rt, PLUME_ERR_INVALID, "format key '%.*s' was not given", (int)nl, name);
            v = kwv[k];
        }
        format_field(rt, &b, v, conv, spec, (size_t)(q - spec));
        p = q + 1;
    }
    return jbuf_take(rt, &b);
}
