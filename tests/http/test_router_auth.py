"""plume router and plume serve refuse a wrong API key the same way.

    test_router_auth.py PLUME TINY_MODEL

Both are started with --api-key (the router with --no-check, in front of
workers that do not exist: the key is checked before any routing), then
each gets the same requests: no Authorization header, a wrong key of the
key's length, a wrong key of another length, the key with a prefix, the
key in another scheme.  Each must be 401 with the one error shape
({"error": {"message", "type": "authentication_error", "param": null,
"code": "invalid_api_key"}}) and
"WWW-Authenticate: Bearer", on every route that needs the key, from both.
The right key passes on both (the router then fails at the missing worker:
502, which proves it got past the check), and /health needs no key.
"""
import http.client
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import CheckFailed, Server, check  # noqa: E402

KEY = "k3y-for-the-router-test"


class Router(Server):
    """plume router in front of workers that do not exist (port 9: refused)."""

    def __init__(self, plume, *extra):
        self.start([plume, "router", "--no-check", "--port", "0", "--prefill",
                    "http://127.0.0.1:9", "--decode", "http://127.0.0.1:9", *extra])

    def kill(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def ask(port, method, path, auth=None, body=None):
    """(status, headers, parsed JSON body) of one request."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json"}
    if auth is not None:
        headers["Authorization"] = auth
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    try:
        parsed = json.loads(data)
    except ValueError:
        parsed = data.decode("utf-8", "replace")
    return r.status, {k.lower(): v for k, v in r.getheaders()}, parsed


def refusal_shape(st, hd, body):
    """What a refusal looks like, without the message's words for whose key."""
    err = body.get("error", {}) if isinstance(body, dict) else {}
    return (st, hd.get("www-authenticate"), sorted(body) if isinstance(body, dict) else body,
            sorted(err), err.get("type"), err.get("code"), "API key" in err.get("message", ""))


def main():
    plume, tiny = sys.argv[1], sys.argv[2]
    srv = Server(plume, tiny, "--api-key", KEY)
    rt = Router(plume, "--api-key", KEY)
    try:
        wrong = [None, "Bearer " + "x" * len(KEY), "Bearer " + KEY[:-1], "Bearer " + KEY + "x",
                 "Bearer x" + KEY, "Basic " + KEY, KEY]
        want = (401, "Bearer", ["error"], ["code", "message", "param", "type"], "authentication_error",
                "invalid_api_key", True)
        body = {"prompt": "Hello", "max_tokens": 2}
        for method, path, b in (("POST", "/v1/completions", body),
                                ("POST", "/v1/chat/completions",
                                 {"messages": [{"role": "user", "content": "Hi"}]}),
                                ("GET", "/v1/models", None)):
            for auth in wrong:
                got = {}
                for name, port in (("serve", srv.port), ("router", rt.port)):
                    got[name] = refusal_shape(*ask(port, method, path, auth, b))
                    check(got[name] == want, (name, method, path, auth, got[name]))
                check(got["serve"] == got["router"], (method, path, auth, got))
        # the right key gets past the check on both
        st, _, r = ask(srv.port, "POST", "/v1/completions", "Bearer " + KEY, body)
        check(st == 200 and r["usage"]["completion_tokens"] == 2, ("serve, right key", st, r))
        st, _, r = ask(rt.port, "POST", "/v1/completions", "Bearer " + KEY, body)
        check(st == 502 and "prefill worker" in r["error"]["message"] and
              r["error"]["type"] == "server_error", ("router, right key", st, r))
        # /health needs no key on either
        for port in (srv.port, rt.port):
            st, _, r = ask(port, "GET", "/health")
            check(st == 200 and r == {"status": "ok"}, ("health", port, st, r))
        # unknown paths and methods: the same error shape from both
        for method, path, code in (("GET", "/v1/nothing", 404), ("GET", "/v1/completions", 405)):
            for port in (srv.port, rt.port):
                st, _, r = ask(port, method, path, "Bearer " + KEY)
                check(st == code and r["error"]["code"] is None and
                      r["error"]["type"] == "invalid_request_error", (port, method, path, st, r))
    finally:
        rt.kill()
        srv.stop()
    print("router_auth: a wrong key is refused identically by plume serve and plume router")


try:
    main()
except CheckFailed as e:
    print(f"FAIL: {e}", file=sys.stderr)
    sys.exit(1)
