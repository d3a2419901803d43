"""Starting and talking to `plume serve` in the tests (tests/http/)."""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
# the http tests import CheckFailed and check from here
from checks import CheckFailed, check  # noqa: E402,F401


def read_head(sock):
    """What sock sends up to the end of the response head (all it sent, when
    it closes before that)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    """`plume serve --port 0` on a model; the port comes from its first line."""

    def __init__(self, plume, model, *extra):
        self.start([plume, "serve", "--model", model, "--port", "0", "--threads", "1", *extra])

    def start(self, argv):
        """Runs argv (`plume serve ...` or `plume router ...`) and reads the
        port from its first line, "plume CMD: listening on http://127.0.0.1:PORT"."""
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        m = re.match(r"plume (serve|router): listening on http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            raise CheckFailed((f"{argv[1]}: no listening line", line, self.proc.stderr.read()))
        self.port = int(m.group(2))
        self.base = f"http://127.0.0.1:{self.port}"

    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, parsed JSON or text) for one request on a fresh connection."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data.decode("utf-8", "replace")

    def metrics(self):
        st, text = self.request("GET", "/metrics")
        check(st == 200, ("metrics", st, text))
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def wait_idle(self, timeout=30):
        """Waits until /metrics shows nothing running or waiting; returns the metrics."""
        end = time.time() + timeout
        while True:
            m = self.metrics()
            if m["plume:num_requests_running"] == 0 and m["plume:num_requests_waiting"] == 0:
                return m
            check(time.time() < end, ("requests still in flight", m))
            time.sleep(0.1)

    def stop(self):
        """SIGTERM; the server must exit 0 saying it stopped."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            out, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise CheckFailed("plume serve did not exit within 60 s of SIGTERM")
        check(self.proc.returncode == 0, ("exit status after SIGTERM", self.proc.returncode, err))
        check("plume serve: stopped" in err, err)
        return err

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def greedy_ids(plume, model, prompt, max_tokens):
    """The token ids `plume generate` gives for prompt alone (greedy)."""
    r = subprocess.run([plume, "generate", "--model", model, "--prompt", prompt, "--max-tokens",
                        str(max_tokens), "--temperature", "0", "--threads", "1", "--json"],
                       capture_output=True, text=True, env=dict(os.environ))
    check(r.returncode == 0, (prompt, r.stderr))
    return json.loads(r.stdout)["token_ids"]
