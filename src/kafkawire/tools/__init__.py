"""kafkawire.tools: tooling around the protocol that is not the protocol itself.

``capture`` reads pcap/pcapng files down to TCP segments, ``reassembly`` puts
TCP byte streams back in order, ``pcap`` finds and decodes the Kafka requests
and responses in them. All sans-IO: they take bytes, the CLI does the reading.
"""
