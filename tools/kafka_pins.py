"""The Apache Kafka releases kafkawire is measured against: the one place to change them.

Moving to a new Kafka release (say 4.5.0) means changing ``KAFKA`` below,
running ``python tools/gen_spec.py`` and committing the regenerated spec; the
reference broker in the tests, the conformance suite and the benchmarks follow
the same pin.

Each entry is a set of Maven coordinates resolved together (with their runtime
dependencies) into one cache directory by ``tools/kafka_reference.py``.
"""

from __future__ import annotations

# The reference: the broker the tests and benchmarks compare with, and the jars
# whose JSON message schemas (common/message, common/metadata, the coordinators'
# records) are the current protocol definitions.
KAFKA = "4.4.0"

# The newest 3.x release: its kafka-clients jar still defines the versions (and
# API keys) that Kafka 4.0 removed, which kafkawire keeps serving to old clients.
KAFKA_LEGACY = "3.9.1"

# Kafka's command line tools (kafka-producer-perf-test and friends, class
# org.apache.kafka.tools.*) for the benchmarks, of the reference's release
# (Maven Central as mirrored here refused 4.4.0 until 2026-11; 4.3.1 was used
# before it was served).
KAFKA_TOOLS = "4.4.0"

# Kafka's own generator test schemas (SimpleExampleMessage and friends: tagged
# fields, nullable structs, arrays, records), shipped in kafka-clients' "test"
# jar. Maven Central as mirrored here serves that jar up to 4.3.1 (4.4.0's is
# refused); these schemas exercise the code generator, not the protocol.
KAFKA_TEST_SCHEMAS = "4.3.1"

# Kafka Streams for the exactly-once test (tests/transactions/test_streams_eos.py):
# a word count with processing.guarantee=exactly_once_v2, killed and restarted;
# of the reference's release too (4.3.1 before 4.4.0 was served here).
KAFKA_STREAMS = "4.4.0"

# Log4j's SLF4J 1.x binding, so that the reference broker's own log reaches
# its log file (Kafka's jars depend on slf4j-api 1.7 and log4j-core 2).
LOG4J = "2.25.2"

ARTIFACTS: dict[str, list[str]] = {
    # The broker: kafka_2.13 brings kafka-clients, kafka-metadata, the group,
    # transaction and share coordinators, kafka-raft and kafka-storage.
    f"kafka-{KAFKA}": [
        f"org.apache.kafka:kafka_2.13:{KAFKA}",
        f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J}",
    ],
    f"kafka-clients-{KAFKA_LEGACY}": [f"org.apache.kafka:kafka-clients:{KAFKA_LEGACY}"],
    f"kafka-clients-test-{KAFKA_TEST_SCHEMAS}": [f"org.apache.kafka:kafka-clients:{KAFKA_TEST_SCHEMAS}:test"],
    f"kafka-tools-{KAFKA_TOOLS}": [
        f"org.apache.kafka:kafka-tools:{KAFKA_TOOLS}",
        f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J}",
    ],
    f"kafka-streams-{KAFKA_STREAMS}": [
        f"org.apache.kafka:kafka-streams:{KAFKA_STREAMS}",
        f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J}",
    ],
}

BROKER = f"kafka-{KAFKA}"
LEGACY_CLIENTS = f"kafka-clients-{KAFKA_LEGACY}"
TOOLS = f"kafka-tools-{KAFKA_TOOLS}"
STREAMS = f"kafka-streams-{KAFKA_STREAMS}"
TEST_SCHEMAS = f"kafka-clients-test-{KAFKA_TEST_SCHEMAS}"
