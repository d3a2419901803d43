/* sample-structured: JSON Schema -> grammar.
 *
 * Supported: type (one or a list), object (properties, required,
 * additionalProperties), array (items, prefixItems, minItems, maxItems),
 * string (minLength, maxLength, pattern, format: date, time, date-time,
 * uuid, email, ipv4, hostname, uri), number and integer (minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum: any integer bounds on integers, bounds
 * >= 0 on numbers), boolean, null, enum, const, anyOf, oneOf, allOf of one
 * schema, $ref to "#..." JSON pointers ($defs, definitions, recursion
 * included), nullable (OpenAPI), and the annotations title, description,
 * default, examples, $schema, $id, $comment, deprecated, readOnly,
 * writeOnly.  Objects give their declared properties in declared order,
 * required ones always, optional ones when the model chooses; extra keys
 * come only from an object with no declared properties (a map).  Any other
 * keyword is refused with one line naming it and where it is.
 *
 * Bounds: nesting deeper than SS_SCHEMA_MAX_DEPTH, more than
 * SS_SCHEMA_MAX_PROPS properties in one object, and the grammar and literal
 * limits of grammar.h are refused. */
#ifndef SS_JSON_SCHEMA_H
#define SS_JSON_SCHEMA_H

#include <stddef.h>

#include "grammar.h"

#define SS_SCHEMA_MAX_DEPTH 64
#define SS_SCHEMA_MAX_PROPS 256
#define SS_SCHEMA_MAX_BYTES (4u << 20)

/* The rule matching the JSON texts that the schema text[0..len) accepts
 * (within what the grammar can express; see above).  An empty object or
 * `true` gives any JSON value; any_object=true instead gives any JSON
 * object (OpenAI's json_object).  -1 with g->err set. */
int32_t ss_json_schema_compile(ss_grammar *g, const char *text, size_t len);
/* Any JSON object (response_format json_object). */
int32_t ss_json_any_object(ss_grammar *g);

#endif
