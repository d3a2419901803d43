/* Reading a JSON file whole (see json_file.h). */
#include "formats/json_file.h"

json_t *json_file_load(const char *path, plume_error *err)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (root)
        return root;
    if (json_error_code(&jerr) == json_error_cannot_open_file)
        plume_err(err, PLUME_ERR_IO, "%s: cannot read: %s", path, jerr.text);
    else
        plume_err(err, PLUME_ERR_FORMAT, "%s: not valid JSON: %s (line %d, column %d)", path,
                  jerr.text, jerr.line, jerr.column);
    return NULL;
}
