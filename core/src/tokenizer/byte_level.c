/* GPT-2's bytes_to_unicode: every byte gets a printable code point.  Bytes
 * '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves; the other
 * 68 bytes get U+0100 onwards in byte order (0x00..0x20 -> U+0100..U+0120,
 * 0x7F..0xA0 -> U+0121..U+0142, 0xAD -> U+0143). */
#include "tokenizer/tok_internal.h"

static uint32_t byte_cp(uint8_t b)
{
    if (b <= 0x20)
        return 0x100u + b;
    if (b >= 0x7f && b <= 0xa0)
        return 0x100u + 33u + (uint32_t)(b - 0x7f);
    if (b == 0xad)
        return 0x100u + 33u + 34u;
    return b;
}

int tok_byte_to_unicode(uint8_t b, char out[4])
{
    uint32_t cp = byte_cp(b);
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

int tok_unicode_to_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7e) || (cp >= 0xa1 && cp <= 0xac) || (cp >= 0xae && cp <= 0xff))
        return (int)cp;
    if (cp >= 0x100 && cp <= 0x120)
        return (int)(cp - 0x100);
    if (cp >= 0x121 && cp <= 0x142)
        return (int)(cp - 0x121 + 0x7f);
    if (cp == 0x143)
        return 0xad;
    return -1;
}
