/* plume — accepting an older interface struct by its struct_size.
 *
 * Every vtable and host struct of the plugin ABI starts with
 * `uint32_t struct_size` (sizeof the struct in the build that filled it),
 * and members are only ever appended.  A struct built against older
 * headers is shorter: the members it lacks lie past its struct_size and
 * read as absent (a NULL slot: "use the core's default"). */
#ifndef PLUME_STRUCT_SIZE_H
#define PLUME_STRUCT_SIZE_H

#include <stddef.h>
#include <stdint.h>

#include "plume/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True when *p (of type T, its first member struct_size) was built with
 * member m: its struct_size reaches past m's end. */
#define PLUME_HAS_MEMBER(T, p, m) \
    ((size_t)(p)->struct_size >= offsetof(T, m) + sizeof(((const T *)0)->m))

/* Copies the struct at src (its first member the uint32_t struct_size) into
 * dst of dst_size bytes: the bytes src has, up to dst_size, and zeros for
 * every member src lacks, so that a slot appended after src was built
 * reads as NULL.  dst's struct_size is left as src's. */
PLUME_API void plume_struct_copy(void *dst, size_t dst_size, const void *src);

#ifdef __cplusplus
}
#endif
#endif
