"""Helpers shared by the Python end-to-end tests: the binary under test, a
check that counts failures instead of stopping at the first, and a free
port on 127.0.0.1, the daemon's /metrics as a dict. Each test script ends with `finish(NAME)`."""
import os
import socket
import sys
import urllib.request

BIN = os.environ.get("RTUGW_BIN", "./rtugw")
_failures = [0]


def check(cond, what, quiet=False):
    if not cond:
        _failures[0] += 1
        print("FAIL:", what, flush=True)
    elif not quiet:
        print("ok:", what, flush=True)


def failure_count():
    return _failures[0]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def fetch_metrics(http_port, timeout=3):
    """The daemon's /metrics as {'name{labels}': value}."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=timeout).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def finish(name, extra=""):
    print(f"{name}: {_failures[0]} failures{extra}")
    sys.exit(1 if _failures[0] else 0)
