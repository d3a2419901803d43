/* Reading a JSON file whole, with the error plume reports for it. */
#ifndef PLUME_FORMATS_JSON_FILE_H
#define PLUME_FORMATS_JSON_FILE_H

#include <jansson.h>

#include "plume/error.h"

/* Parses the JSON file at path, refusing duplicate keys.  Returns the
 * document (the caller json_decref's it), or NULL with err set: IO when the
 * file cannot be read, FORMAT (with line and column) when it is not JSON. */
json_t *json_file_load(const char *path, plume_error *err);

#endif
