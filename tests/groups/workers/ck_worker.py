"""A confluent-kafka group consumer in its own process (so a test can SIGKILL it).

argv: bootstrap topic group protocol(classic|cooperative|consumer) events-file stop-file [group.instance.id]
Writes JSON lines: {"k": "assigned", "parts": [...]} whenever its assignment changes,
{"k": "rec", "p": partition, "o": offset, "v": value} per record, {"k": "closed"} at the end.
Commits synchronously after each batch. Creating the stop file makes it close() cleanly.
"""

import json
import os
import sys
import time

import confluent_kafka as ck

bootstrap, topic, group, protocol, events, stop = sys.argv[1:7]
instance = sys.argv[7] if len(sys.argv) > 7 else None
out = open(events, "a", buffering=1)


def emit(kind, **kw):
    out.write(json.dumps({"k": kind, "t": time.time(), **kw}) + "\n")


conf = {
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "topic.metadata.refresh.interval.ms": 1000,
}
if protocol in ("classic", "cooperative"):
    conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    if protocol == "cooperative":
        conf["partition.assignment.strategy"] = "cooperative-sticky"
else:
    conf["group.protocol"] = "consumer"
if instance:
    conf["group.instance.id"] = instance
c = ck.Consumer(conf)
c.subscribe([topic])
last = None
deadline = time.time() + 300
while not os.path.exists(stop) and time.time() < deadline:
    msgs = c.consume(100, 0.2)
    parts = sorted(tp.partition for tp in c.assignment())
    if parts != last:
        last = parts
        emit("assigned", parts=parts)
    got = False
    for m in msgs:
        if m.error():
            emit("error", error=str(m.error()))
            continue
        got = True
        emit("rec", p=m.partition(), o=m.offset(), v=int(m.value()))
    if got:
        try:
            c.commit(asynchronous=False)
        except ck.KafkaException as exc:
            emit("commit_error", error=str(exc))
c.close()
emit("closed")
