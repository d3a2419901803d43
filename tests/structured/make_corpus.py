"""Writes schema_corpus.json: JSON schemas of real-world shape for the
structured-output tests (nesting, enums, bounded arrays, optional fields,
$ref/$defs, anyOf, formats, patterns).  Hand-written bases, then variants
that change one aspect each, so every entry is distinct.  Run it to
regenerate; the test reads the committed file."""
import copy
import json
import sys

S = {"type": "string"}
I = {"type": "integer"}
N = {"type": "number"}
B = {"type": "boolean"}


def obj(props, required=None, extra=False, **kw):
    o = {"type": "object", "properties": props,
         "required": list(props) if required is None else required}
    if not extra:
        o["additionalProperties"] = False
    o.update(kw)
    return o


def arr(items, lo=None, hi=None):
    a = {"type": "array", "items": items}
    if lo is not None:
        a["minItems"] = lo
    if hi is not None:
        a["maxItems"] = hi
    return a


def enum(*v):
    return {"type": "string", "enum": list(v)}


BASES = [
    ("person", "a person", obj({"name": S, "age": {"type": "integer", "minimum": 0, "maximum": 130}, "email": {"type": "string", "format": "email"}}, ["name", "age"])),
    ("address", "a postal address", obj({"street": S, "city": S, "postal_code": {"type": "string", "pattern": "^[0-9]{5}$"}, "country": enum("US", "FR", "DE", "JP", "BR")}, ["street", "city", "country"])),
    ("product", "a product in a shop", obj({"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}, "title": {"type": "string", "maxLength": 40}, "price": {"type": "number", "minimum": 0}, "in_stock": B, "tags": arr(S, 0, 5)}, ["sku", "title", "price", "in_stock"])),
    ("order", "a customer order", {"$defs": {"line": obj({"sku": S, "quantity": {"type": "integer", "minimum": 1, "maximum": 99}})}, **obj({"order_id": I, "lines": arr({"$ref": "#/$defs/line"}, 1, 4), "status": enum("pending", "paid", "shipped", "cancelled")})}),
    ("event", "a calendar event", obj({"title": S, "start": {"type": "string", "format": "date-time"}, "all_day": B, "attendees": arr({"type": "string", "format": "email"}, 0, 3)}, ["title", "start"])),
    ("weather", "a weather report", obj({"city": S, "temperature_c": {"type": "number"}, "condition": enum("sunny", "cloudy", "rain", "snow", "storm"), "humidity": {"type": "integer", "minimum": 0, "maximum": 100}})),
    ("invoice", "an invoice", {"$defs": {"money": obj({"amount": {"type": "number", "minimum": 0}, "currency": enum("USD", "EUR", "GBP")})}, **obj({"number": {"type": "string", "pattern": "^INV-[0-9]{4}$"}, "total": {"$ref": "#/$defs/money"}, "paid": B, "due": {"type": "string", "format": "date"}}, ["number", "total", "paid"])}),
    ("sentiment", "the sentiment of a review", obj({"sentiment": enum("positive", "negative", "neutral"), "confidence": {"type": "number", "minimum": 0, "maximum": 1}})),
    ("entities", "named entities in a sentence", obj({"entities": arr(obj({"text": S, "label": enum("PERSON", "ORG", "LOC", "DATE")}), 0, 4)})),
    ("recipe", "a recipe", obj({"name": S, "servings": {"type": "integer", "minimum": 1, "maximum": 12}, "ingredients": arr(obj({"item": S, "grams": {"type": "integer", "minimum": 0}}), 1, 5), "vegetarian": B})),
    ("movie", "a movie", obj({"title": S, "year": {"type": "integer", "minimum": 1888, "maximum": 2030}, "genres": arr(enum("drama", "comedy", "action", "horror", "documentary"), 1, 3), "rating": {"type": ["number", "null"]}}, ["title", "year", "genres"])),
    ("book", "a book", obj({"isbn": {"type": "string", "pattern": "^97[89][0-9]{10}$"}, "title": S, "authors": arr(S, 1, 3), "pages": {"type": "integer", "minimum": 1}}, ["title", "authors"])),
    ("tool_call", "arguments of a weather tool call", obj({"location": S, "unit": enum("celsius", "fahrenheit"), "days": {"type": "integer", "minimum": 1, "maximum": 7}}, ["location"])),
    ("search", "a search query", obj({"query": {"type": "string", "minLength": 1, "maxLength": 60}, "filters": obj({"language": enum("en", "fr", "de"), "after": {"type": "string", "format": "date"}}, []), "limit": {"type": "integer", "minimum": 1, "maximum": 50}}, ["query"])),
    ("classification", "a support ticket classification", obj({"category": enum("billing", "bug", "feature", "account", "other"), "priority": {"enum": [1, 2, 3]}, "needs_human": B})),
    ("user_profile", "a user profile", obj({"username": {"type": "string", "pattern": "^[a-z][a-z0-9_]{2,15}$"}, "display_name": S, "bio": {"anyOf": [S, {"type": "null"}]}, "followers": {"type": "integer", "minimum": 0}}, ["username", "followers"])),
    ("github_issue", "a GitHub issue", obj({"title": S, "labels": arr(enum("bug", "enhancement", "question", "docs"), 0, 3), "assignee": {"anyOf": [obj({"login": S, "id": I}), {"type": "null"}]}, "state": enum("open", "closed")})),
    ("flight", "a flight booking", obj({"from": {"type": "string", "pattern": "^[A-Z]{3}$"}, "to": {"type": "string", "pattern": "^[A-Z]{3}$"}, "date": {"type": "string", "format": "date"}, "passengers": arr(obj({"name": S, "seat": {"type": "string", "pattern": "^[0-9]{1,2}[A-F]$"}}), 1, 3), "class": enum("economy", "business", "first")})),
    ("geo", "a geographic point", obj({"lat": {"type": "number"}, "lon": {"type": "number"}, "label": S}, ["lat", "lon"])),
    ("tree", "a small file tree", {"$defs": {"node": obj({"name": S, "children": arr({"$ref": "#/$defs/node"}, 0, 2)}, ["name"])}, "$ref": "#/$defs/node"}),
    ("shape", "a geometric shape", {"anyOf": [obj({"kind": {"const": "circle"}, "radius": {"type": "number", "minimum": 0}}), obj({"kind": {"const": "rect"}, "w": {"type": "number", "minimum": 0}, "h": {"type": "number", "minimum": 0}})]}),
    ("payment", "a payment method", {"oneOf": [obj({"type": {"const": "card"}, "last4": {"type": "string", "pattern": "^[0-9]{4}$"}}), obj({"type": {"const": "iban"}, "iban": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{2}[A-Z0-9]{10,20}$"}})]}),
    ("log_entry", "a server log entry", obj({"timestamp": {"type": "string", "format": "date-time"}, "level": enum("DEBUG", "INFO", "WARN", "ERROR"), "message": {"type": "string", "maxLength": 80}, "ip": {"type": "string", "format": "ipv4"}}, ["timestamp", "level", "message"])),
    ("contact_list", "a list of contacts", obj({"contacts": arr(obj({"name": S, "phone": {"type": "string", "pattern": "^\\+?[0-9]{7,12}$"}}, ["name"]), 1, 3)})),
    ("employee", "an employee record", {"definitions": {"dept": enum("eng", "sales", "hr", "ops")}, **obj({"id": {"type": "string", "format": "uuid"}, "name": S, "department": {"$ref": "#/definitions/dept"}, "manager_id": {"type": ["string", "null"]}, "salary": {"type": "integer", "minimum": 30000, "maximum": 300000}}, ["id", "name", "department"])}),
    ("quiz", "a quiz question", obj({"question": S, "choices": arr(S, 2, 4), "answer_index": {"type": "integer", "minimum": 0, "maximum": 3}})),
    ("nutrition", "nutrition facts", obj({"calories": {"type": "integer", "minimum": 0, "maximum": 5000}, "protein_g": {"type": "number", "minimum": 0}, "allergens": arr(enum("gluten", "nuts", "dairy", "soy", "eggs"), 0, 5)})),
    ("repo", "a code repository", obj({"name": {"type": "string", "pattern": "^[a-z0-9-]{1,30}$"}, "stars": {"type": "integer", "minimum": 0}, "language": {"enum": ["C", "Python", "Rust", "Go", None]}, "topics": arr(S, 0, 4), "license": {"anyOf": [enum("MIT", "Apache-2.0", "GPL-3.0"), {"type": "null"}]}}, ["name", "stars"])),
    ("meeting", "meeting notes", obj({"date": {"type": "string", "format": "date"}, "attendees": arr(S, 1, 5), "decisions": arr(S, 0, 3), "action_items": arr(obj({"owner": S, "task": S, "due": {"type": "string", "format": "date"}}, ["owner", "task"]), 0, 3)})),
    ("api_error", "an API error response", obj({"error": obj({"code": {"type": "integer", "minimum": 400, "maximum": 599}, "message": S, "retryable": B})})),
]


def variants(name, desc, schema):
    """The base and three changed copies of it."""
    yield name, desc, schema
    # every property optional
    v = copy.deepcopy(schema)
    if v.get("type") == "object" and "required" in v:
        v["required"] = []
        yield name + "_optional", desc + " (any fields)", v
    else:
        yield name + "_nullable", desc + " or null", {**defs_of(schema), "anyOf": [strip_defs(copy.deepcopy(schema)), {"type": "null"}]}
    # wrapped in a list with bounds
    yield name + "_list", "a list of two or three: " + desc, {"type": "object", "properties": {"items": {"type": "array", "items": copy.deepcopy(strip_defs(schema)), "minItems": 2, "maxItems": 3}}, "required": ["items"], "additionalProperties": False, **defs_of(schema)}
    # wrapped with a status enum and a $ref to the base
    yield name + "_envelope", "a response holding " + desc, {"$defs": {**schema.get("$defs", {}), "payload": strip_defs(copy.deepcopy(schema))}, **({"definitions": schema["definitions"]} if "definitions" in schema else {}), "type": "object", "properties": {"status": {"enum": ["ok", "partial"]}, "data": {"$ref": "#/$defs/payload"}}, "required": ["status", "data"], "additionalProperties": False}


def strip_defs(s):
    s = dict(s)
    s.pop("$defs", None)
    s.pop("definitions", None)
    return s


def defs_of(s):
    out = {}
    if "$defs" in s:
        out["$defs"] = s["$defs"]
    if "definitions" in s:
        out["definitions"] = s["definitions"]
    return out


def main():
    corpus = []
    for name, desc, schema in BASES:
        for n, d, s in variants(name, desc, schema):
            corpus.append({"name": n, "description": d, "schema": s})
    names = [c["name"] for c in corpus]
    assert len(set(names)) == len(names)
    out = sys.argv[1] if len(sys.argv) > 1 else "schema_corpus.json"
    with open(out, "w") as f:
        json.dump(corpus, f, indent=1)
        f.write("\n")
    print(f"{len(corpus)} schemas -> {out}")


if __name__ == "__main__":
    main()
