#!/usr/bin/python3
"""The write token cannot be guessed (issue 42, fault 2), against the real
daemon over real sockets.

What must hold:
  - token_strength: `rtugw check` refuses a write_token that cannot hold
    128 bits by its length and alphabet (4711; 31 hexadecimal digits; 21
    base64url characters) with FILE:LINE, the bits counted and the rule,
    never echoing the token; it takes 32 hexadecimal or 22 base64url
    characters; `rtugw run` refuses to start on a short one; `rtugw
    hash-password --token` makes a 44-character token that check takes,
    a new one each time; the demo's configuration has no fixed token;
  - bearer_guessing: issue 42's attack, 4,712 guesses of a 4-digit token,
    now meets a refusal at load; against a strong token, guesses from one
    address and from many (127.0.x.y) are heard 5 times free, then answered
    429 unheard with Retry-After (the right token too, during the wait),
    each one heard is audited ("bearer token refused") and counted in
    /metrics; once the wait is over the right token is taken."""
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Gateway, check, run_tests, wait_listening  # noqa: E402

WORK = tempfile.mkdtemp(prefix="rtugw-tokens-")


def rtugw_check(text):
    path = os.path.join(WORK, "check.conf")
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([BIN, "check", "-c", path], capture_output=True, text=True)
    return path, r.returncode, r.stdout + r.stderr


def test_token_strength():
    base = "[bus a]\nport = sim:1\n[http]\nport = 18999\n"
    for token, what in (("4711", "4 digits"), ("0123456789abcdef0123456789abcde", "31 hexadecimal digits"),
                        ("abcdefghijABCDEFGHIJ_", "21 base64url characters"), ("correct-horse", "13 characters")):
        path, rc, out = rtugw_check(base + f"write_token = {token}\n")
        check(rc == 2 and f"{path}:5: [http] write_token: too short" in out and "128 are required" in out and
              token not in out, f"check refuses {what} with FILE:LINE and the rule, not the token ({rc}: {out.strip()})")
    for token, what in (("0123456789abcdef0123456789abcdef", "32 hexadecimal digits"),
                        ("abcdefghijABCDEFGHIJ_-", "22 base64url characters")):
        _, rc, out = rtugw_check(base + f"write_token = {token}\n")
        check(rc == 0, f"check takes {what} ({rc}: {out.strip()[-200:]})")
    made = [subprocess.run([BIN, "hash-password", "--token"], capture_output=True, text=True) for _ in range(2)]
    toks = [m.stdout.strip() for m in made]
    check(all(m.returncode == 0 for m in made) and all(re.fullmatch(r"[A-Za-z0-9_-]{44}", t) for t in toks) and
          toks[0] != toks[1], f"hash-password --token makes 44 base64url characters, new each time ({toks})")
    _, rc, out = rtugw_check(base + f"write_token = {toks[0]}\n")
    check(rc == 0, f"check takes the token it made ({out.strip()[-200:]})")
    demo = subprocess.run([BIN, "check", "--demo", "--print"], capture_output=True, text=True).stdout
    check("write_token =" not in demo, "the demo's configuration has no fixed write_token (it makes one at start)")
    help_text = subprocess.run([BIN, "hash-password", "--help"], capture_output=True, text=True).stdout
    check("--token" in help_text, "hash-password --help names --token")
    # rtugw run refuses a short token at load: exit 2, nothing listening
    path, _, _ = rtugw_check(base + "write_token = 4711\n")
    r = subprocess.run([BIN, "run", "-c", path], capture_output=True, text=True, timeout=10)
    check(r.returncode == 2 and "too short" in r.stderr, f"rtugw run refuses write_token = 4711 ({r.returncode})")


def whoami(port, token, source):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, 0))
    c.request("GET", "/whoami", headers={"Authorization": f"Bearer {token}"})
    r = c.getresponse()
    body = r.read().decode(errors="replace")
    c.close()
    return r.status, r.getheader("Retry-After"), body


def test_bearer_guessing():
    token = subprocess.run([BIN, "hash-password", "--token"], capture_output=True, text=True).stdout.strip()
    g = Gateway(extra=f"write_token = {token}\nmetrics_open = true\n")
    try:
        wait_listening(g.http_port, g.p)
        # 4,712 guesses of issue 42's attack, from one address, then from 60
        heard, throttled, t0 = 0, 0, time.time()
        for i in range(4712):
            source = "127.0.0.1" if i < 2356 else f"127.0.{10 + i % 60}.{1 + i % 200}"
            st, retry, body = whoami(g.http_port, f"{i:04d}", source)
            if st == 200 and '"role":"none"' in body:
                heard += 1
            elif st == 429 and retry and int(retry) >= 1:
                throttled += 1
            if time.time() - t0 > 8:
                break
        took = time.time() - t0
        done = heard + throttled
        print(f"   {done} guesses in {took:.1f} s: {heard} heard, {throttled} refused unheard (429)")
        # 5 free, then one after each wait of 1, 2, 4 ... s: at most ~9 heard in 8 s
        check(heard <= 5 + 1 + int(took).bit_length() + 1 and throttled >= done - heard and done >= 1000,
              f"guessing is slowed: {heard} of {done} guesses heard in {took:.1f} s (was all 4,712)")
        st, retry, body = whoami(g.http_port, token, "127.0.99.1")
        check(st == 429 and retry, f"during the wait the right token is refused unheard too ({st}, {body.strip()})")
        m = g.metrics()
        check(m.get("rtugw_http_bearer_failures_total") == heard and
              m.get("rtugw_http_bearer_throttled_total", 0) >= throttled,
              f"counted: {m.get('rtugw_http_bearer_failures_total')} failures, "
              f"{m.get('rtugw_http_bearer_throttled_total')} throttled")
        log = g.log_text()
        lines = [ln for ln in log.splitlines() if "bearer token refused" in ln]
        check(lines and not any(re.search(r"Bearer|\b0\d{3}\b", ln) for ln in lines),
              f"the guesses are audited in the log, without the guessed token ({lines[:1]})")
        wait = int(retry or 60)
        time.sleep(min(wait, 60) + 0.2)
        st, _, body = whoami(g.http_port, token, "127.0.99.1")
        check(st == 200 and '"via":"write_token"' in body, f"after the wait the right token is taken ({st}, {body})")
        st, body = 0, ""
        c = http.client.HTTPConnection("127.0.0.1", g.http_port, timeout=10)
        c.request("GET", "/audit", headers={"Authorization": f"Bearer {token}"})
        r = c.getresponse()
        st, body = r.status, r.read().decode(errors="replace")
        c.close()
        check(st == 200 and "bearer token refused" in body, f"GET /audit lists the refused bearer tokens ({st})")
    finally:
        g.stop()


if __name__ == "__main__":
    run_tests("test_web_tokens", [test_token_strength, test_bearer_guessing], cleanup=[WORK])
