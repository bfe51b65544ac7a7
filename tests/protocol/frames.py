"""Real frames used by several test modules (hex as captured)."""

API_VERSIONS_REQUEST_V3 = bytes.fromhex(
    "0000002600120003000000070002633100126170616368652d6b61666b612d6a61766106332e392e3100")

DESCRIBE_TOPIC_PARTITIONS_REQUEST_V0 = bytes.fromhex(
    "00000031004b0000589eecfb000c6b61666b612d746573746572000212756e6b6e6f776e2d746f7069632d73617a"
    "0000000001ff00")

# As reported: the size says 55 but 56 bytes follow (one extra 0x00 among the zeros after the
# correlation id).
DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0_AS_GIVEN = bytes.fromhex(
    "00000037589eecfb00000000000002000312756e6b6e6f776e2d746f7069632d73617a0000000000000000000000"
    "0000000000000100000df800ff00")

# The same frame with the extra byte at payload offset 5 removed: 55 bytes follow the size.
DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0 = (DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0_AS_GIVEN[:4 + 5]
                                         + DESCRIBE_TOPIC_PARTITIONS_RESPONSE_V0_AS_GIVEN[4 + 6:])
