/* plume — PLUME_API, the mark of the SDK.
 *
 * libplume is built with hidden symbol visibility: a function is exported
 * from libplume.so (and so callable from a plugin or an SDK program) only
 * when its declaration in core/include/plume/ carries PLUME_API.  Every
 * function declared in these headers carries it, and nothing else in the
 * core does; tests/sdk/check_exports.py fails the build's tests when the
 * two drift apart (an internal symbol leaks, or a public one is missing). */
#ifndef PLUME_API_H
#define PLUME_API_H

#if defined(_WIN32) || defined(__CYGWIN__)
#define PLUME_API
#else
#define PLUME_API __attribute__((visibility("default")))
#endif

#endif
