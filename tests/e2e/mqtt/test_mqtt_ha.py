#!/usr/bin/python3
"""[mqtt] ha_discovery = on: Home Assistant MQTT discovery documents, on
Debian's mosquitto, read back by paho and checked against the schema Home
Assistant documents for each platform (www.home-assistant.io/integrations/
sensor.mqtt, binary_sensor.mqtt, number.mqtt, switch.mqtt; the device class
lists and their units from /integrations/sensor#device-class):

  - one retained document per tag on homeassistant/COMPONENT/OBJECT_ID/config:
    sensor, binary_sensor (a read-only bool), number (a writable number),
    switch (a writable bool); only keys the platform documents, its required
    ones present; unit_of_measurement; device_class where the unit implies
    one, and a unit that class accepts; availability topics that exist
    (retained, online); a device block;
  - the number's command_template, rendered as Home Assistant does and
    published on its command_topic, writes the register;
  - homeassistant/status "online" (Home Assistant's birth): the documents again;
  - a tag removed by a reload: its document is deleted (an empty retained
    message; a new subscriber gets none)."""
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))  # tests/lib: the shared helpers
from rtugwtest import Gateway, check, run_tests, wait_for  # noqa: E402
import test_mqtt  # noqa: E402
from test_mqtt import Broker, mqtt_section  # noqa: E402

import paho.mqtt.client as mqtt  # noqa: E402

WORK = test_mqtt.WORK

# Home Assistant's documented configuration variables (the subset a
# discovery document may use here), per platform; REQUIRED: must be there.
COMMON = {"name", "unique_id", "object_id", "state_topic", "value_template", "availability",
          "availability_mode", "availability_topic", "device", "icon", "enabled_by_default", "entity_category",
          "qos", "json_attributes_topic", "json_attributes_template", "expire_after", "force_update"}
SCHEMA = {
    "sensor": COMMON | {"unit_of_measurement", "device_class", "state_class", "suggested_display_precision"},
    "binary_sensor": COMMON | {"device_class", "payload_on", "payload_off", "off_delay"},
    "number": (COMMON | {"command_topic", "command_template", "min", "max", "step", "mode", "unit_of_measurement",
                         "device_class", "optimistic", "retain", "payload_reset"}) - {"expire_after", "force_update"},
    "switch": (COMMON | {"command_topic", "payload_on", "payload_off", "state_on", "state_off", "device_class",
                         "optimistic", "retain"}) - {"expire_after", "force_update"},
}
REQUIRED = {"sensor": {"state_topic"}, "binary_sensor": {"state_topic"}, "number": {"command_topic"},
            "switch": {"command_topic"}}
DEVICE_KEYS = {"identifiers", "connections", "name", "manufacturer", "model", "sw_version", "hw_version",
               "via_device", "suggested_area", "configuration_url"}
# sensor device classes and the units Home Assistant accepts for them
CLASS_UNITS = {"voltage": {"V", "mV"}, "current": {"A", "mA"}, "power": {"W", "kW"}, "energy": {"Wh", "kWh", "MWh"},
               "frequency": {"Hz", "kHz", "MHz", "GHz"}, "temperature": {"°C", "°F", "K"},
               "pressure": {"Pa", "hPa", "kPa", "bar", "cbar", "mbar", "mmHg", "inHg", "psi"}}
STATE_CLASSES = {"measurement", "total", "total_increasing"}


def tag(name, table, address, typ, extra=""):
    return (f"[tag {name}]\ndevice = d1\ntable = {table}\naddress = {address}\ntype = {typ}\ninterval_ms = 100\n"
            f"{extra}")


TAGS = ("[device d1]\nslave = 1\n" + tag("volts", "holding", 0, "uint16", "unit = V\n") +
        tag("energy", "holding", 2, "uint32", "unit = kWh\n") + tag("sp", "holding", 1, "uint16", "writable = true\n") +
        tag("alarm", "discrete", 0, "bool") + tag("relay", "coil", 1, "bool", "writable = true\n"))


class Retained:
    """paho on homeassistant/# and rtugw/#: the last payload of each topic, and every message."""

    def __init__(self, port, cid):
        self.last, self.all, self.lock = {}, [], threading.Lock()
        self.c = mqtt.Client(client_id=cid, clean_session=True)
        ready = threading.Event()

        def on_connect(c, u, f, rc):
            c.subscribe([("homeassistant/#", 1), ("rtugw/#", 1)])
            ready.set()

        def on_message(c, u, m):
            with self.lock:
                self.last[m.topic] = bytes(m.payload)
                self.all.append((m.topic, bytes(m.payload), m.retain))

        self.c.on_connect, self.c.on_message = on_connect, on_message
        self.c.connect("127.0.0.1", port, keepalive=10)
        self.c.loop_start()
        ready.wait(5)
        time.sleep(0.5)

    def docs(self):
        with self.lock:
            return {t: json.loads(p) for t, p in self.last.items()
                    if t.startswith("homeassistant/") and t.endswith("/config") and p}

    def publish(self, topic, payload):
        self.c.publish(topic, payload, qos=1).wait_for_publish()

    def close(self):
        self.c.loop_stop()
        self.c.disconnect()


def schema_errors(topic, doc, seen):
    comp = topic.split("/")[1]
    errs = []
    if comp not in SCHEMA:
        return [f"{topic}: component {comp}"]
    errs += [f"{topic}: key {k} not in {comp}'s schema" for k in doc if k not in SCHEMA[comp]]
    errs += [f"{topic}: required {k} missing" for k in REQUIRED[comp] if k not in doc]
    errs += [f"{topic}: device key {k}" for k in doc.get("device", {}) if k not in DEVICE_KEYS]
    if not doc.get("device", {}).get("identifiers"):
        errs.append(f"{topic}: device without identifiers")
    cls = doc.get("device_class")
    if comp == "sensor" and cls and doc.get("unit_of_measurement") not in CLASS_UNITS.get(cls, ()):
        errs.append(f"{topic}: unit {doc.get('unit_of_measurement')} not one of {cls}'s")
    if "state_class" in doc and doc["state_class"] not in STATE_CLASSES:
        errs.append(f"{topic}: state_class {doc['state_class']}")
    for a in doc.get("availability", []):
        if a["topic"] not in seen:
            errs.append(f"{topic}: availability topic {a['topic']} not published")
        elif not json.loads(seen[a["topic"]]).get("online"):
            errs.append(f"{topic}: availability topic {a['topic']} not online")
    if topic.split("/")[2] != doc.get("object_id"):
        errs.append(f"{topic}: object id {doc.get('object_id')} differs from the topic's")
    return errs


def test_discovery():
    b = Broker("ha")
    sub = Retained(b.port, "ha-sub")
    g = Gateway(bus="port = sim:1\nbaud = 115200\n", devices=TAGS,
                extra=mqtt_section(b.port, "gha", "format = json-per-tag\nha_discovery = on\n"))
    want = {"homeassistant/sensor/gha_d1_volts/config", "homeassistant/sensor/gha_d1_energy/config",
            "homeassistant/number/gha_d1_sp/config", "homeassistant/binary_sensor/gha_d1_alarm/config",
            "homeassistant/switch/gha_d1_relay/config"}
    check(wait_for(lambda: set(sub.docs()) == want, 10), f"one document per tag, by component: {sorted(sub.docs())}")
    check(wait_for(lambda: "rtugw/gha/d1/status" in sub.last, 10), "the device's status is published")
    docs = sub.docs()
    errs = [e for t, d in docs.items() for e in schema_errors(t, d, sub.last)]
    check(not errs, f"every document follows Home Assistant's schema: {errs[:4]}")
    v = docs["homeassistant/sensor/gha_d1_volts/config"]
    check(v.get("unit_of_measurement") == "V" and v.get("device_class") == "voltage" and
          v.get("state_class") == "measurement" and v.get("state_topic") == "rtugw/gha/d1/volts",
          f"volts: V, voltage, measurement, its json-per-tag topic ({v})")
    e = docs["homeassistant/sensor/gha_d1_energy/config"]
    check(e.get("device_class") == "energy" and e.get("state_class") == "total_increasing",
          f"energy: kWh is energy, total_increasing ({e})")
    check(all(d.get("device", {}).get("identifiers") == ["rtugw_gha_d1"] for d in docs.values()),
          "one device block for d1 on every entity")
    # the number's command, as Home Assistant renders command_template
    n = docs["homeassistant/number/gha_d1_sp/config"]
    sub.publish(n["command_topic"], n["command_template"].replace("{{ value }}", "42"))
    check(wait_for(lambda: json.loads(sub.last.get("rtugw/gha/d1/sp", b"{}")).get("value") == 42, 10),
          "the number's command_template on its command_topic writes the register (42 read back)")
    # Home Assistant's birth: the documents again
    before = len(sub.all)
    sub.publish("homeassistant/status", "online")
    check(wait_for(lambda: len({t for t, _, _ in sub.all[before:] if t in want}) == len(want), 10),
          "homeassistant/status online: every document again")
    # the tag sp removed: its document is deleted
    with open(g.cfg) as f:
        text = f.read()
    with open(g.cfg, "w") as f:
        f.write(text.replace(tag("sp", "holding", 1, "uint16", "writable = true\n"), ""))
    g.p.send_signal(signal.SIGHUP)
    gone = "homeassistant/number/gha_d1_sp/config"
    check(wait_for(lambda: sub.last.get(gone) == b"", 10), "the removed tag's document: an empty retained message")
    fresh = Retained(b.port, "ha-sub2")
    time.sleep(0.5)
    with fresh.lock:
        kept = {t for t, p, r in fresh.all if r and p and t in want}
    check(gone not in fresh.last and kept == want - {gone},
          f"a new subscriber gets no document for it, and the others as retained messages ({sorted(kept)})")
    fresh.close()
    g.stop()
    sub.close()
    b.stop()


def main():
    run_tests("test_mqtt_ha", [test_discovery], cleanup=[WORK])


if __name__ == "__main__":
    main()
