/* PLUME_SERVE_API, the mark of what libplume-serve exports.
 *
 * libplume-serve (core/src/serve/) is built with hidden symbol visibility
 * like libplume: the functions its headers declare with PLUME_SERVE_API are
 * the HTTP layer that the `plume` executable (serve, router, bench serve)
 * calls; everything else stays inside the library. */
#ifndef PLUME_SERVE_SERVE_API_H
#define PLUME_SERVE_SERVE_API_H

#define PLUME_SERVE_API __attribute__((visibility("default")))

#endif
