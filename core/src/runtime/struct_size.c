/* plume_struct_copy (plume/struct_size.h). */
#include <string.h>

#include "plume/struct_size.h"

void plume_struct_copy(void *dst, size_t dst_size, const void *src)
{
    uint32_t have;
    memcpy(&have, src, sizeof have);
    size_t n = have < dst_size ? have : dst_size;
    memcpy(dst, src, n);
    memset((char *)dst + n, 0, dst_size - n);
}
