"""What the dial-in tests share (tests/e2e/transports/test_dialin.py, tests/e2e/transports/test_dialin_shared.py),
imported by them, not a test itself: the Modbus TCP client that reads through
rtugw's [tcp] all along and counts each answer good, wrong, an exception or an
error."""
import random
import time

from pymodbus.client import ModbusTcpClient


def reader(tcp_port, stop, out, pick, pause):
    """Until stop is set: pick(rng) gives (unit, addr, count, the values
    wanted, a name for a wrong answer's line); out counts good, wrong,
    exceptions (then pause s) and errors."""
    c = ModbusTcpClient("127.0.0.1", port=tcp_port, timeout=2)
    c.connect()
    rng = random.Random(3)
    while not stop.is_set():
        unit, addr, count, want, what = pick(rng)
        try:
            rr = c.read_holding_registers(addr, count, slave=unit)
        except Exception:
            out["errors"] += 1
            c.close()
            c.connect()
            continue
        if rr.isError() or not hasattr(rr, "registers"):
            out["exceptions"] += 1
            time.sleep(pause)
            continue
        if rr.registers != want:
            out["wrong"] += 1
            print(f"WRONG {what} addr {addr}: {rr.registers} != {want}", flush=True)
        else:
            out["good"] += 1
        time.sleep(pause / 3)
    c.close()
