"""Message schemas (kafka-python's JSON format) for the two KIP-848 APIs kafka-python 3.0 has no codec for.

Written here from the protocol's field lists, version 0 only: ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69). kafka_raw.py makes request and response classes of them.
"""
