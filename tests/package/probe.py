#!/usr/bin/python3
"""Probes run inside the booted test container (tests/package/test_package.sh).

Standard library only (the container has Debian's python3 and nothing else):
  probe.py modbus HOST PORT SLAVE ADDR COUNT   read holding registers, a hand-made MBAP frame
  probe.py add-device URL TOKEN NAME JSON      PUT /api/devices/NAME with GET /api/config's revision
  probe.py import-csv URL TOKEN TEMPLATE FILE  PUT /api/templates/NAME/csv: dry run, then applied
Each prints one line of what it saw and exits 0 on success, 1 otherwise.
"""
import json
import socket
import struct
import sys
import urllib.error
import urllib.request


def modbus(host, port, slave, addr, count):
    req = struct.pack(">HHHBBHH", 0x4354, 0, 6, slave, 3, addr, count)
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(req)
        head = b""
        while len(head) < 7:
            chunk = s.recv(7 - len(head))
            if not chunk:
                raise SystemExit("modbus: connection closed")
            head += chunk
        tid, proto, length, unit = struct.unpack(">HHHB", head)
        body = b""
        while len(body) < length - 1:
            chunk = s.recv(length - 1 - len(body))
            if not chunk:
                raise SystemExit("modbus: connection closed mid-frame")
            body += chunk
    if tid != 0x4354 or proto != 0 or unit != slave:
        print(f"modbus: bad header tid={tid:#x} proto={proto} unit={unit}")
        return 1
    if body[0] != 3:
        print(f"modbus: exception {body[0]:#x} code {body[1]:#x}")
        return 1
    if body[1] != 2 * count:
        print(f"modbus: byte count {body[1]}, expected {2 * count}")
        return 1
    regs = struct.unpack(f">{count}H", body[2:2 + 2 * count])
    print(f"modbus: slave {slave} holding {addr}..{addr + count - 1} = {list(regs)}")
    return 0


def call(method, url, token=None, body=None, headers=None):
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(url, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def add_device(base, token, name, keys):
    st, hd, text = call("GET", base + "/api/config", token)
    if st != 200:
        print(f"GET /api/config: {st} {text.strip()}")
        return 1
    rev = hd.get("ETag", "").strip('"')
    st, _, text = call("PUT", f"{base}/api/devices/{name}", token, keys,
                       {"If-Match": rev, "Content-Type": "application/json"})
    print(f"PUT /api/devices/{name} (If-Match {rev}): {st} {text.strip()[:200]}")
    if st != 200:
        return 1
    st, _, text = call("GET", base + "/api/devices")
    names = [d["name"] for d in json.loads(text)["devices"]] if st == 200 else []
    print(f"GET /api/devices: {names}")
    return 0 if name in names else 1


def import_csv(base, token, template, path):
    csv = open(path, encoding="utf-8").read()
    st, hd, text = call("GET", f"{base}/api/templates/{template}/csv", token)
    if st != 200:
        print(f"GET /api/templates/{template}/csv: {st} {text.strip()}")
        return 1
    etag = hd.get("ETag", "").strip('"')
    st, _, text = call("PUT", f"{base}/api/templates/{template}/csv?dry_run=1", token, csv,
                       {"Content-Type": "text/csv"})
    print(f"PUT .../csv?dry_run=1: {st} {text.strip()[:200]}")
    if st != 200:
        return 1
    st, _, text = call("PUT", f"{base}/api/templates/{template}/csv", token, csv,
                       {"If-Match": etag, "Content-Type": "text/csv"})
    print(f"PUT .../csv (If-Match {etag}): {st} {text.strip()[:200]}")
    return 0 if st == 200 else 1


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "modbus" and len(argv) == 7:
        return modbus(argv[2], int(argv[3]), int(argv[4]), int(argv[5]), int(argv[6]))
    if cmd == "add-device" and len(argv) == 6:
        return add_device(argv[2], argv[3], argv[4], argv[5])
    if cmd == "import-csv" and len(argv) == 6:
        return import_csv(argv[2], argv[3], argv[4], argv[5])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
