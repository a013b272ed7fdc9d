#!/usr/bin/python3
"""Every HTTP route x method x credential against the documented role rules
(docs/security.md, "The web side: users, roles, logins"), with users.

The routes are not a hand list: they are read from web/'s routing code (the
paths its handlers compare with, the page's asset table, the API's section
and CSV tables), so a route added there without a rule here fails the test
(`every route has a rule`). Each route is asked GET, PUT, POST and DELETE
by seven credentials: anonymous; a viewer's, an operator's and an admin's
session cookie (writes with this server's Origin, as the page sends them);
the write_token (with users: an operator); an ended session's cookie (the
server keeps no expiry apart from an end: logged out or timed out are the
same unknown token); and the cookie of another gateway's session for the
same admin user name (a session is this server's, not a name's). The
verdict is the guard's: 401 (no valid credential), 403 (a role too low) or
"ok" (the request reached its handler, whatever it then answered: 200, 400,
404, 405, 428...). The matrix is printed; every cell must match."""
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import BIN, Gateway, check, run_tests, wait_listening  # noqa: E402

SRC = os.environ.get("RTUGW_SRCDIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
METHODS = ("GET", "PUT", "POST", "DELETE")
CREDS = ("anonymous", "viewer", "operator", "admin", "token", "ended", "foreign")
ROLE = {"viewer": 1, "operator": 2, "admin": 3, "token": 2}   # the write_token is an operator with users
VIEWER, OPERATOR, ADMIN = 1, 2, 3


def routes_from_source():
    """The routes web/'s code answers, NAME standing for a name."""
    web = os.path.join(SRC, "web")
    found = set()
    for fn in sorted(os.listdir(web)):
        if not fn.endswith(".c"):
            continue
        with open(os.path.join(web, fn)) as f:
            text = f.read()
        # the paths handlers compare with: strcmp(path, "/x"), strncmp(path, "/x/", n)
        for cmp, lit in re.findall(r'\b(strn?cmp)\(path, "(/[^"]*)"', text):
            if lit == "/api/":
                continue   # api.c's dispatch: its routes are below
            found.add(lit + "NAME" if cmp == "strncmp" and lit.endswith("/") else lit)
        # api.c: strcmp(what, "x") is /api/x
        for lit in re.findall(r'\bstrcmp\(what, "([^"]+)"\)', text):
            found.add("/api/" + lit)
        # the page's assets (web.c) and the open paths (auth.c): tables of "/..."
        for table in re.findall(r'(?:assets\[\]|open\[\]) = \{(.*?)\};', text, re.S):
            found.update(re.findall(r'"(/[^"]*)"', table))
        # api.c's section paths: { "devices/", "device" }
        for table in re.findall(r'section_paths\[\] = \{(.*?)\};', text, re.S):
            found.update("/api/" + p + "NAME" for p in re.findall(r'\{ "(\w+/)", "\w+" \}', table))
        # api_csv.c: prefixes { "templates/", "devices/" } with the suffix "/csv"
        m = re.search(r'suffix\[\] = "(/\w+)";\s*static const char \*const prefixes\[\] = \{([^}]*)\}', text)
        if m:
            found.update("/api/" + p + "NAME" + m.group(1) for p in re.findall(r'"(\w+/)"', m.group(2)))
    return found


def rule(route, method):
    """The role a route needs with users (0: none), from docs/security.md's
    table: the page's files, /login, /logout, /whoami open; every GET a
    viewer's; tag writes an operator's; /api/ changes, /api/config, the tag
    files as CSV and /audit an admin's; any other write an admin's."""
    read = method == "GET"
    if route in ("/", "/index.html", "/app.js", "/config.js", "/scan.js", "/style.css", "/login", "/logout", "/whoami"):
        return 0
    if route == "/audit" or route == "/api/config" or route.endswith("/csv"):
        return ADMIN
    if route.startswith("/api/"):
        return VIEWER if read else ADMIN
    if read:
        return VIEWER
    return OPERATOR if route == "/tags/NAME" else ADMIN


def expected(route, method, cred):
    need = rule(route, method)
    if route == "/logout" and method == "POST" and cred in ("anonymous", "token", "ended", "foreign"):
        return "401"   # the handler's own: no session to end (the write_token is none)
    if need == 0:
        return "ok"
    if cred not in ROLE:
        return "401"
    return "ok" if ROLE[cred] >= need else "403"


def concrete(route):
    return route.replace("/tags/NAME", "/tags/sp").replace("NAME", "meter")


def call(port, method, path, headers):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    body = b"" if method in ("PUT", "POST") else None
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read().decode(errors="replace")
    c.close()
    return r.status, data


def login(port, user, pw):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", "/login", json.dumps({"user": user, "password": pw}), {"Content-Type": "application/json"})
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    return json.loads(body)["token"] if r.status == 200 else None


def hash_password(pw):
    return subprocess.run([BIN, "hash-password", "--cost", "1"], input=pw + "\n", capture_output=True,
                          text=True).stdout.strip()


USERS = (("ada", "admin-pw", "admin"), ("otto", "operator-pw", "operator"), ("vera", "viewer-pw", "viewer"))
TPL = ("[template meter]\ntags_file = meter.csv\n[device d1]\nslave = 1\n"
       "[tag sp]\ndevice = d1\ntable = holding\naddress = 10\ntype = uint16\nwritable = true\ninterval_ms = 500\n")


def test_matrix():
    routes = routes_from_source()
    print(f"   routes read from web/*.c: {len(routes)}: {' '.join(sorted(routes))}")
    known = {"/", "/index.html", "/app.js", "/config.js", "/scan.js", "/style.css", "/login", "/logout", "/whoami", "/audit",
             "/metrics", "/status", "/frames", "/tags", "/tags/NAME", "/api/openapi.json", "/api/buses",
             "/api/devices", "/api/templates", "/api/tags", "/api/config", "/api/config/validate",
             "/api/devices/NAME", "/api/tags/NAME", "/api/templates/NAME", "/api/polls/NAME", "/api/buses/NAME",
             "/api/templates/NAME/csv", "/api/devices/NAME/csv", "/api/scan", "/api/maps"}
    check(routes - known == set(), f"every route has a rule here (new: {sorted(routes - known)})")
    check(len(routes) >= 20 and known - routes == set(),
          f"the source scan finds every route the rules know (missed: {sorted(known - routes)})")

    users = "".join(f"[user {n}]\npassword_hash = {hash_password(pw)}\nrole = {r}\n" for n, pw, r in USERS)
    token = subprocess.run([BIN, "hash-password", "--token"], capture_output=True, text=True).stdout.strip()
    other = Gateway(extra=users)   # another gateway: its sessions are not this one's
    d = tempfile.mkdtemp(prefix="rtugw-matrix-")
    with open(os.path.join(d, "meter.csv"), "w") as f:
        f.write("name,table,address,type\nv,holding,0,uint16\n")
    g = Gateway(devices=TPL, extra=f"write_token = {token}\n" + users, dir=d)
    try:
        wait_listening(g.http_port, g.p)
        wait_listening(other.http_port, other.p)
        foreign = login(other.http_port, "ada", "admin-pw")
        origin = {"Origin": f"http://127.0.0.1:{g.http_port}"}

        def session(cred):
            user = {"viewer": USERS[2], "operator": USERS[1], "admin": USERS[0]}[cred]
            return login(g.http_port, user[0], user[1])

        ended = session("admin")
        call(g.http_port, "POST", "/logout", {"Cookie": f"rtugw_session={ended}", **origin})
        sessions = {c: session(c) for c in ("viewer", "operator", "admin")}

        def headers(cred, method):
            h = dict(origin) if method != "GET" else {}
            if cred in sessions:
                h["Cookie"] = f"rtugw_session={sessions[cred]}"
            elif cred == "token":
                h["Authorization"] = f"Bearer {token}"
            elif cred == "ended":
                h["Cookie"] = f"rtugw_session={ended}"
            elif cred == "foreign":
                h["Cookie"] = f"rtugw_session={foreign}"
            return h

        wrong, rows = [], []
        for route in sorted(routes):
            for method in METHODS:
                cells = []
                for cred in CREDS:
                    st, body = call(g.http_port, method, concrete(route), headers(cred, method))
                    got = str(st) if st in (401, 403) else "ok"
                    want = expected(route, method, cred)
                    cells.append(f"{st}{'' if got == want else '!'}")
                    if got != want:
                        wrong.append(f"{method} {route} as {cred}: {st} ({body.strip()[:80]}), expected {want}")
                    if route == "/logout" and method == "POST" and cred in sessions:
                        sessions[cred] = session(cred)   # it logged out: a fresh one for what follows
                rows.append(f"   {method:6} {route:26} " + " ".join(f"{c:>9}" for c in cells))
        print("   " + " " * 34 + " ".join(f"{c:>9}" for c in CREDS))
        print("\n".join(rows))
        print(f"   ({len(rows) * len(CREDS)} requests; '!' marks a cell against the rules)")
        check(not wrong, f"every cell as the role rules say ({len(wrong)} wrong: {wrong[:8]})")
        check(foreign is not None, "the other gateway gave a session (so the foreign cookie is a real one)")
    finally:
        g.stop()
        other.stop()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run_tests("test_web_matrix", [test_matrix])
