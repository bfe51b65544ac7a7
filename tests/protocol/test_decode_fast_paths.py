"""The fast decoder's special cases give exactly what the general code gives: arrays of fixed-width
structs unpacked in one call, multi-byte varint lengths decoded in line, tagged struct defaults built
without the constructor. Each case also on malformed input and on every kind of input buffer."""

from __future__ import annotations

import uuid

import pytest

from kafkawire.protocol import DecodeError, codegen, message_class

ApiVersions = message_class("ApiVersionsResponse")
LeaderChange = message_class("LeaderChangeMessage")
Vote = message_class("VoteResponse")
Quorum = message_class("DescribeQuorumResponse")
Fetch = message_class("FetchResponse")
Produce = message_class("ProduceRequest")
Simple = message_class("SimpleExampleMessage")

BUFFERS = [bytes, bytearray, memoryview, lambda d: memoryview(b"??" + d)[2:]]


def _api_versions(n, version=3):
    return ApiVersions(
        api_keys=[ApiVersions.ApiVersion(api_key=k, min_version=k % 3, max_version=k % 17 - 3) for k in range(n)],
        throttle_time_ms=5 if version else 0,
    )


def _check(cls, msg, version):
    data = msg.encode(version)
    for wrap in BUFFERS:
        back = cls.decode(wrap(data), version)
        assert back == msg
        assert back.encode(version) == data
    obj, end = cls.decode_from(b"\x01" + data + b"\x02", 1, version)
    assert obj == msg and end == 1 + len(data)


@pytest.mark.parametrize(
    "n",
    [
        0,
        1,
        2,
        3,
        codegen._FIXED_ARRAY_MIN - 1,
        codegen._FIXED_ARRAY_MIN,
        17,
        64,
        200,
        codegen._FIXED_ARRAY_MAX,
        codegen._FIXED_ARRAY_MAX + 1,
    ],
)
@pytest.mark.parametrize("version", [0, 2, 3, 4])
def test_fixed_struct_arrays_of_every_size(n, version):
    assert "_fixed_array" in ApiVersions.codec(version).source  # the one-call path is the one tested
    _check(ApiVersions, _api_versions(n, version), version)


def test_fixed_struct_arrays_with_uuid_bool_and_int64_fields():
    voters = [
        LeaderChange.Voter(voter_id=i, voter_directory_id=uuid.UUID(int=i * 7919 if i % 3 else 0)) for i in range(40)
    ]
    _check(LeaderChange, LeaderChange(leader_id=3, voters=voters), 1)
    decoded = LeaderChange.decode(LeaderChange(voters=voters).encode(1), 1)
    assert all(type(v.voter_directory_id) is uuid.UUID for v in decoded.voters)
    assert decoded.voters[0].voter_directory_id is not None and decoded.voters[1].voter_directory_id.int == 7919

    parts = [
        Vote.PartitionData(partition_index=i, error_code=i % 2, leader_id=i, leader_epoch=-i, vote_granted=bool(i % 2))
        for i in range(30)
    ]
    msg = Vote(topics=[Vote.TopicData(topic_name="t", partitions=parts)])
    for version in (0, 1, 2):
        _check(Vote, msg, version)

    voters = [
        Quorum.ReplicaState(
            replica_id=i,
            replica_directory_id=uuid.UUID(int=i),
            log_end_offset=1 << 40,
            last_fetch_timestamp=-1,
            last_caught_up_timestamp=i,
        )
        for i in range(12)
    ]
    partition = Quorum.PartitionData(partition_index=0, current_voters=voters, observers=voters[:2])
    _check(Quorum, Quorum(topics=[Quorum.TopicData(topic_name="__cluster_metadata", partitions=[partition])]), 2)


@pytest.mark.parametrize("version", [0, 1])
def test_fixed_struct_arrays_whose_version_lacks_a_field_between_present_ones(version):
    # ReplicaState's directory id (v2+) sits between fields v0 has; the elements are built by one
    # call with the values in the class's field order, so the absent field's default goes in between
    assert "_fixed_array" in Quorum.codec(version).source
    default = Quorum.ReplicaState()
    voters = [
        Quorum.ReplicaState(
            replica_id=i,
            log_end_offset=(1 << 40) + i,
            last_fetch_timestamp=i if version else default.last_fetch_timestamp,
            last_caught_up_timestamp=-i if version else default.last_caught_up_timestamp,
        )
        for i in range(codegen._FIXED_ARRAY_MIN + 2)
    ]
    partition = Quorum.PartitionData(partition_index=0, current_voters=voters, observers=voters[:2])
    msg = Quorum(topics=[Quorum.TopicData(topic_name="__cluster_metadata", partitions=[partition])])
    _check(Quorum, msg, version)
    back = Quorum.decode(msg.encode(version), version).topics[0].partitions[0].current_voters
    assert [v.log_end_offset for v in back] == [(1 << 40) + i for i in range(len(voters))]
    assert all(v.replica_directory_id == default.replica_directory_id for v in back)


def test_struct_array_elements_are_distinct_mutable_objects():
    back = ApiVersions.decode(_api_versions(10).encode(3), 3)
    assert len({id(a) for a in back.api_keys}) == 10
    back.api_keys[2].max_version = 99
    back.api_keys.append(ApiVersions.ApiVersion(api_key=1000))
    assert back.api_keys[3].max_version != 99
    assert all(a.unknown_tags == [] for a in back.api_keys)


@pytest.mark.parametrize("where", [0, 1, 5, 9])
def test_an_unknown_tag_in_one_element_falls_back_to_the_general_loop(where):
    assert codegen._FIXED_ARRAY_MIN <= 10
    msg = _api_versions(10)
    msg.api_keys[where]._unknown_tags = [(7, b"\x01\x02")]
    _check(ApiVersions, msg, 3)
    back = ApiVersions.decode(msg.encode(3), 3)
    assert back.api_keys[where].unknown_tags == [(7, b"\x01\x02")]
    assert all(a.unknown_tags == [] for i, a in enumerate(back.api_keys) if i != where)


def test_a_tag_in_one_element_is_not_taken_for_padding():
    # SimpleExampleMessage v2's StructArray elements are fixed-width; a non-zero tag byte starts a tag
    # section that the one-call path must not take for the padding it skips
    elem = Simple.StructArray(array_field_id=5)
    elem._unknown_tags = [(0, b"\x09")]
    msg = Simple(
        my_struct=Simple.MyStruct(
            struct_id=1,
            array_in_struct=[Simple.StructArray(array_field_id=1), elem, Simple.StructArray(array_field_id=2)],
        )
    )
    _check(Simple, msg, 2)


def test_truncation_and_corruption_inside_a_fixed_struct_array():
    data = _api_versions(20).encode(3)
    # error_code (2) + count (1) + 20 elements of 7 bytes + throttle (4) + tags (1); a cut that leaves
    # fewer bytes than elements fails on the count, any other names the element it falls in
    for cut in range(3, 3 + 20 * 7):
        with pytest.raises(DecodeError) as info:
            ApiVersions.decode(data[:cut], 3)
        if cut - 3 < 20:
            assert info.value.path == "ApiKeys" and info.value.offset == 2
        else:
            assert info.value.path.startswith(f"ApiKeys[{(cut - 3) // 7}]."), (cut, info.value.path)
            assert 3 + (cut - 3) // 7 * 7 <= info.value.offset <= cut
    # a tag count that claims more tags than the input holds, in the middle of the array
    bad = bytearray(data)
    bad[3 + 7 * 12 + 6] = 0x7F
    with pytest.raises(DecodeError) as info:
        ApiVersions.decode(bytes(bad), 3)
    assert info.value.path == "ApiKeys[12]._tagged_fields"


def test_fixed_array_formats_are_cached_per_count_within_a_budget(monkeypatch):
    cache = codegen._fixed_array_cache("hhhx")
    for n in range(2, 160):
        _check(ApiVersions, _api_versions(n), 3)
    assert all(codegen._FIXED_ARRAY_MIN <= n <= codegen._FIXED_ARRAY_MAX for n in cache)
    assert codegen._fixed_array(cache, "hhhx", codegen._FIXED_ARRAY_MAX + 1) is None
    # once the budget is spent, new counts decode through the general loop, as correctly
    monkeypatch.setattr(codegen, "_fixed_array_spent", codegen._FIXED_ARRAY_BUDGET)
    before = dict(cache)
    for n in (300, 301, 302):
        _check(ApiVersions, _api_versions(n), 3)
    assert cache == before


@pytest.mark.parametrize("size", [0, 126, 127, 128, 16383, 16384, 20000, (1 << 21) - 2, (1 << 21) + 5])
def test_records_lengths_of_one_to_four_varint_bytes(size):
    # compact lengths are size + 1: one byte up to 126, two up to 16382, three up to 2 MiB, then four
    msg = Produce(
        acks=1,
        timeout_ms=1,
        topic_data=[
            Produce.TopicProduceData(
                name="t",
                partition_data=[Produce.PartitionProduceData(index=i, records=bytes([i + 1]) * size) for i in range(2)],
            )
        ],
    )
    data = msg.encode(9)
    back = Produce.decode(data, 9)
    assert back == msg and back.encode(9) == data
    assert type(back.topic_data[0].partition_data[1].records) is memoryview


def test_truncated_multi_byte_lengths_are_decode_errors():
    msg = Produce(
        topic_data=[
            Produce.TopicProduceData(
                name="t", partition_data=[Produce.PartitionProduceData(index=0, records=b"x" * 20000)]
            )
        ]
    )
    data = msg.encode(9)
    start = data.index(b"x" * 100) - 3  # the three bytes of the records length
    for cut in range(start, start + 3):
        with pytest.raises(DecodeError) as info:
            Produce.decode(data[:cut], 9)
        assert info.value.path.endswith(".Records"), info.value.path


def test_default_tagged_structs_are_fresh_per_element():
    parts = [Fetch.PartitionData(partition_index=i, records=b"r") for i in range(3)]
    back = Fetch.decode(Fetch(responses=[Fetch.FetchableTopicResponse(topic="t", partitions=parts)]).encode(12), 12)
    got = back.responses[0].partitions
    assert got[0].diverging_epoch == Fetch.EpochEndOffset() and got[0].snapshot_id == Fetch.SnapshotId()
    assert got[0].current_leader == Fetch.LeaderIdAndEpoch()
    assert got[0].diverging_epoch is not got[1].diverging_epoch
    got[0].diverging_epoch.epoch = 5
    got[0].snapshot_id.end_offset = 9
    assert got[1].diverging_epoch.epoch == -1 and got[2].snapshot_id.end_offset == -1
    assert got[0].diverging_epoch.unknown_tags == []
    # and a tagged struct that is present still decodes to its value
    parts[1].current_leader = Fetch.LeaderIdAndEpoch(leader_id=4, leader_epoch=8)
    again = Fetch.decode(Fetch(responses=[Fetch.FetchableTopicResponse(topic="t", partitions=parts)]).encode(12), 12)
    assert again.responses[0].partitions[1].current_leader.leader_id == 4
    assert again.responses[0].partitions[0].current_leader == Fetch.LeaderIdAndEpoch()


Metadata = message_class("MetadataResponse")


def _metadata(names, replicas, version=12):
    topics = [
        Metadata.MetadataResponseTopic(
            name=name,
            topic_id=uuid.UUID(int=i + 1 if version >= 10 else 0),
            partitions=[
                Metadata.MetadataResponsePartition(
                    partition_index=p,
                    replica_nodes=replicas,
                    isr_nodes=replicas[:1],
                    offline_replicas=replicas[2:] if version >= 5 else [],
                )
                for p in range(3)
            ],
        )
        for i, name in enumerate(names)
    ]
    return Metadata(
        brokers=[Metadata.MetadataResponseBroker(node_id=1, host="h\u00e9", port=1, rack=None)],
        cluster_id="c" if version >= 2 else None,
        topics=topics,
    )


@pytest.mark.parametrize("version", [1, 9, 12])
def test_strings_and_int_arrays_on_every_kind_of_buffer(version):
    names = ["a", "", "\u00fcml\u00e4ut", "\u65e5\u672c", "x" * 126, "y" * 127, "z" * 300, "w" * 20000]
    for replicas in ([], [7], list(range(63)), list(range(64)), list(range(1000))):
        _check(Metadata, _metadata(names, replicas, version), version)


@pytest.mark.parametrize("wrap", BUFFERS)
def test_invalid_utf8_and_truncated_int_arrays_on_every_kind_of_buffer(wrap):
    data = bytearray(_metadata(["abc"], list(range(70))).encode(12))
    at = data.index(b"abc")
    bad = bytearray(data)
    bad[at + 1] = 0xFF
    with pytest.raises(DecodeError) as info:
        Metadata.decode(wrap(bytes(bad)), 12)
    assert info.value.path == "Topics[0].Name" and "UTF-8" in info.value.problem
    # cuts inside the 70 replicas (the helper's path) and inside the one isr node (the struct call's)
    replicas = data.index(bytes([71]) + (0).to_bytes(4, "big") + (1).to_bytes(4, "big"))
    for cut in (replicas + 5, replicas + 200, replicas + 1 + 70 * 4 + 2):
        with pytest.raises(DecodeError) as info:
            Metadata.decode(wrap(bytes(data[:cut])), 12)
        assert info.value.path.startswith("Topics[0].Partitions[0]."), info.value.path


def test_tag_sections_and_lengths_read_with_the_fixed_run_before_them():
    # a topic ends with a fixed field then its tag section; its name follows a fixed field (error_code)
    msg = _metadata(["t" * 200, "u", "v"], [1, 2, 3])
    msg.topics[0]._unknown_tags = [(5, b"x" * 300)]
    msg.topics[2]._unknown_tags = [(1, b""), (200, b"\x00")]
    _check(Metadata, msg, 12)
    back = Metadata.decode(msg.encode(12), 12)
    assert back.topics[0].unknown_tags == [(5, b"x" * 300)] and back.topics[1].unknown_tags == []
    # and every cut through them is still a decode error naming a field
    data = msg.encode(12)
    for cut in range(len(data) - 700, len(data)):
        with pytest.raises(DecodeError):
            Metadata.decode(data[:cut], 12)


def test_decoded_uuids_are_shared_from_a_bounded_cache():
    ids = [uuid.UUID(int=(i + 1) * 0x1000000000000000000001) for i in range(codegen._UUIDS_MAX + 50)]
    voters = [LeaderChange.Voter(voter_id=i, voter_directory_id=u) for i, u in enumerate(ids)]
    for wrap in BUFFERS:
        back = LeaderChange.decode(wrap(LeaderChange(voters=voters).encode(1)), 1)
        assert [v.voter_directory_id for v in back.voters] == ids
        assert len(codegen._UUIDS) <= codegen._UUIDS_MAX
    # a decoded id is the same (immutable) object the next time, and the zero id is the shared one
    msg = Metadata(
        topics=[Metadata.MetadataResponseTopic(name="a", topic_id=ids[-1]), Metadata.MetadataResponseTopic(name="b")]
    )
    one, two = (Metadata.decode(msg.encode(12), 12) for _ in range(2))
    assert one.topics[0].topic_id is two.topics[0].topic_id and one.topics[0].topic_id == ids[-1]
    assert one.topics[1].topic_id is uuid.UUID(int=0) or one.topics[1].topic_id == uuid.UUID(int=0)
    with pytest.raises(TypeError):
        one.topics[0].topic_id.int = 5


def test_large_decodes_pause_the_cycle_collector_and_always_restore_it(monkeypatch):
    import gc

    from kafkawire.protocol import messages

    calls = []
    monkeypatch.setattr(messages, "_gc_disable", lambda: (calls.append("off"), gc.disable()))
    monkeypatch.setattr(messages, "_gc_enable", lambda: (calls.append("on"), gc.enable()))
    big = _metadata([f"topic-{i}" for i in range(150)], [1, 2, 3]).encode(12)
    assert len(big) >= messages._GC_PAUSE_BYTES
    small = _metadata(["a"], [1]).encode(12)
    was = gc.isenabled()
    try:
        gc.enable()
        Metadata.decode(small, 12)
        assert calls == []  # small inputs never touch the collector
        Metadata.decode(big, 12)
        assert calls == ["off", "on"] and gc.isenabled()
        obj, end = Metadata.decode_from(b"\x00" + big, 1, 12)
        assert end == 1 + len(big) and calls[2:] == ["off", "on"] and gc.isenabled()
        with pytest.raises(DecodeError):
            Metadata.decode(big[:-3], 12)
        with pytest.raises(DecodeError):
            Metadata.decode_from(big[:-3], 0, 12)
        assert calls[4:] == ["off", "on", "off", "on"] and gc.isenabled()
        # a collector the caller turned off stays off, and is not touched
        gc.disable()
        del calls[:]
        Metadata.decode(big, 12)
        assert calls == [] and not gc.isenabled()
        # messages carrying records are mostly bytes: no pause for them
        gc.enable()
        Produce.decode(
            Produce(
                topic_data=[
                    Produce.TopicProduceData(
                        name="t", partition_data=[Produce.PartitionProduceData(index=0, records=b"x" * 40000)]
                    )
                ]
            ).encode(9),
            9,
        )
        assert calls == []
    finally:
        (gc.enable if was else gc.disable)()


def test_tagged_struct_fields_are_written_exactly_when_they_differ_from_the_default():
    def encoded_tags(part):
        msg = Fetch(responses=[Fetch.FetchableTopicResponse(topic="t", partitions=[part])])
        back = Fetch.decode(msg.encode(12), 12)
        assert back == msg
        return back.responses[0].partitions[0], len(msg.encode(12))

    plain, size = encoded_tags(Fetch.PartitionData(records=b""))
    same, same_size = encoded_tags(
        Fetch.PartitionData(
            records=b"", diverging_epoch=Fetch.EpochEndOffset(), snapshot_id=Fetch.SnapshotId(epoch=-1, end_offset=-1)
        )
    )
    assert same_size == size  # equal to the defaults: nothing written
    for change in (
        dict(diverging_epoch=Fetch.EpochEndOffset(epoch=0)),
        dict(diverging_epoch=Fetch.EpochEndOffset(end_offset=7)),
        dict(current_leader=Fetch.LeaderIdAndEpoch(leader_epoch=3)),
        dict(snapshot_id=Fetch.SnapshotId(epoch=2)),
    ):
        part, changed_size = encoded_tags(Fetch.PartitionData(records=b"", **change))
        assert changed_size > size
    tagged = Fetch.EpochEndOffset()
    tagged._unknown_tags = [(9, b"\x01")]
    part, changed_size = encoded_tags(Fetch.PartitionData(records=b"", diverging_epoch=tagged))
    assert changed_size > size and part.diverging_epoch.unknown_tags == [(9, b"\x01")]


def _partitions(n, replicas=(1, 2, 3), isr=(1, 2), offline=(), version=12):
    return [
        Metadata.MetadataResponsePartition(
            error_code=p % 2,
            partition_index=p,
            leader_id=replicas[0] if replicas else -1,
            leader_epoch=p * 3 if version >= 7 else -1,
            replica_nodes=list(replicas),
            isr_nodes=list(isr),
            offline_replicas=list(offline),
        )
        for p in range(n)
    ]


def _topic(partitions, version=12):
    topic_id = uuid.UUID(int=9) if version >= 10 else uuid.UUID(int=0)
    return Metadata(topics=[Metadata.MetadataResponseTopic(name="t", topic_id=topic_id, partitions=partitions)])


@pytest.mark.parametrize("version", [1, 5, 9, 12])  # int32 lengths up to v8, compact ones from v9
@pytest.mark.parametrize("n", [codegen._FIXED_ARRAY_MIN - 1, codegen._FIXED_ARRAY_MIN, 12, 100])
def test_shaped_struct_arrays_of_every_shape(version, n):
    # elements of fixed fields and int arrays (a partition) in one struct call per shape of the first element
    assert "_shaped_array" in Metadata.codec(version).source  # the one-call path is the one tested
    offline = (3,) if version >= 5 else ()
    for replicas, isr in (((1, 2, 3), (1, 2)), ((), ()), ((4,), (4,)), (tuple(range(126)), (1,))):
        _check(Metadata, _topic(_partitions(n, replicas, isr, offline, version), version), version)
    # one element shaped unlike the first (longer, shorter, an inner array of 127+ values) falls back
    for other in ((1, 2, 3, 4), (1,), tuple(range(127)), tuple(range(300))):
        for where in (0, 1, n - 1):
            partitions = _partitions(n, offline=offline, version=version)
            partitions[where].isr_nodes = list(other)
            _check(Metadata, _topic(partitions, version), version)


def test_an_unknown_tag_in_one_shaped_element_falls_back_to_the_general_loop():
    for where in (0, 5, 11):
        partitions = _partitions(12)
        partitions[where]._unknown_tags = [(4, b"\x07")]
        msg = _topic(partitions)
        _check(Metadata, msg, 12)
        back = Metadata.decode(msg.encode(12), 12)
        assert [p.unknown_tags for p in back.topics[0].partitions] == [
            [(4, b"\x07")] if i == where else [] for i in range(12)
        ]


def test_shaped_elements_are_distinct_and_their_lists_independent():
    back = Metadata.decode(_topic(_partitions(12)).encode(12), 12)
    parts = back.topics[0].partitions
    assert len({id(p) for p in parts}) == 12 and len({id(p.replica_nodes) for p in parts}) == 12
    assert all(type(p.replica_nodes) is list and type(p.offline_replicas) is list for p in parts)
    parts[0].replica_nodes.append(9)
    parts[1].isr_nodes[0] = 7
    assert parts[2].replica_nodes == [1, 2, 3] and parts[2].isr_nodes == [1, 2]
    # an inner array empty in the whole shape is a fresh list per element, in this decode and the next
    assert len({id(p.offline_replicas) for p in parts}) == 12
    parts[3].offline_replicas.append(5)
    assert all(p.offline_replicas == [] for p in parts[4:])
    again = Metadata.decode(_topic(_partitions(12)).encode(12), 12)
    assert all(p.offline_replicas == [] for p in again.topics[0].partitions)


def test_shaped_struct_arrays_with_a_uuid_field():
    # a uuid scalar is made per element from a strided slice of the scalars, not the shared iterator
    heartbeat = message_class("ConsumerGroupHeartbeatRequest")
    assert "_shaped_array" in heartbeat.codec(1).source
    for n in (codegen._FIXED_ARRAY_MIN, 40):
        parts = [heartbeat.TopicPartitions(topic_id=uuid.UUID(int=t + 1), partitions=[t, t + 1]) for t in range(n)]
        msg = heartbeat(group_id="g", member_id="m", member_epoch=3, topic_partitions=parts)
        _check(heartbeat, msg, 1)
        back = heartbeat.decode(msg.encode(1), 1)
        assert [p.topic_id for p in back.topic_partitions] == [uuid.UUID(int=t + 1) for t in range(n)]


def test_shaped_array_formats_are_cached_per_count_and_shape_within_a_budget(monkeypatch):
    # the budget is the process's: tests run before this one (many brokers' Metadata answers) may have spent it
    monkeypatch.setattr(codegen, "_fixed_array_spent", 0)
    data = _topic(_partitions(23, replicas=(1, 2, 3, 4, 5))).encode(12)
    _check(Metadata, Metadata.decode(data, 12), 12)
    layout = (("h", 0), ("i", 0), ("i", 0), ("i", 0), ("i", 1), ("i", 1), ("i", 1))
    cache = codegen._SHAPED_ARRAY_CACHES[(layout, True)]
    assert (23, 5, 2, 0) in cache
    # once the budget is spent, new shapes decode through the general loop, as correctly
    monkeypatch.setattr(codegen, "_fixed_array_spent", codegen._FIXED_ARRAY_BUDGET)
    before = dict(cache)
    assert codegen._shaped_array(cache, (24, 5, 2, 0), layout, True) is None
    _check(Metadata, _topic(_partitions(24, replicas=(1, 2, 3, 4, 5))), 12)
    assert cache == before


@pytest.mark.parametrize("version", [5, 9, 12])  # int32 lengths up to v8, compact ones from v9
@pytest.mark.parametrize("offline", [(), (2,)])
def test_fast_and_checked_decoders_agree_on_every_corrupted_byte_of_a_shaped_array(version, offline):
    # the one-call path must accept exactly what the element loop accepts, and give the same message
    data = _topic(_partitions(12, offline=offline, version=version), version).encode(version)
    codec = Metadata.codec(version)
    for at in range(len(data)):
        for value in (0, 1, 2, 4, 5, 0x7F, 0x80, 0xFF):
            bad = bytearray(data)
            bad[at] = value
            for wrap in (bytes, memoryview):
                buf = wrap(bytes(bad))
                try:
                    checked = codec.decode_checked(buf, 0, ["", "", 0], "")
                except Exception:
                    checked = None
                try:
                    fast = Metadata.decode_from(buf, 0, version)
                except DecodeError as exc:
                    assert checked is None, (at, value, exc)
                    assert "decodes when checked" not in str(exc)
                    assert exc.path and exc.offset is not None  # names a field (later ones when a length moved)
                else:
                    assert checked is not None and fast == checked, (at, value)


def test_truncation_inside_a_shaped_array_names_the_element():
    data = _topic(_partitions(12)).encode(12)
    size = 2 + 4 * 3 + 1 + 3 * 4 + 1 + 2 * 4 + 1 + 1  # ids, replicas, isr, (empty) offline, tags
    start = len(data) - 1 - 5 - 12 * size  # the message's tags, the topic's operations and tags
    for cut in range(start, start + 12 * size):
        with pytest.raises(DecodeError) as info:
            Metadata.decode(data[:cut], 12)
        if cut - start < 12:  # fewer bytes left than elements: the count is refused
            assert info.value.path == "Topics[0].Partitions"
        else:
            assert info.value.path.startswith(f"Topics[0].Partitions[{(cut - start) // size}]."), (cut, info.value.path)


def _agree(cls, version, data, positions):
    """Corrupt each byte at ``positions`` (and cut the input there): the fast decoder accepts exactly
    what the checked one accepts, gives the same message, and otherwise a DecodeError naming a field."""
    codec = cls.codec(version)
    cases = [data[:at] for at in positions]
    for at in positions:
        for value in (0, 1, 2, 0x7F, 0x80, 0xFF):
            bad = bytearray(data)
            bad[at] = value
            cases.append(bytes(bad))
    for case in cases:
        for wrap in (bytes, memoryview):
            buf = wrap(case)
            try:
                checked = codec.decode_checked(buf, 0, ["", "", 0], "")
            except Exception:
                checked = None
            try:
                fast = cls.decode_from(buf, 0, version)
            except DecodeError as exc:
                assert checked is None, exc
                assert "decodes when checked" not in str(exc)
                assert exc.path and exc.offset is not None
            else:
                assert checked is not None and fast == checked


@pytest.mark.parametrize("version", [3, 8, 9, 12])  # int32 lengths to v8, compact (read with the index) from v9
def test_records_and_names_whose_end_is_checked_by_the_next_read(version):
    # the fast decoder leaves the end of a string, bytes or records value to the read at that end
    # (the next field's length or fixed run, the tag section), and reads a compact records length's
    # first byte with the index before it: both must refuse what the checked decoder refuses
    sizes = [0, 5, 126, 127, 300, 16384]
    msg = Produce(
        transactional_id="tx" if version >= 3 else None,
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            Produce.TopicProduceData(
                name=f"topic-{t}",
                partition_data=[
                    Produce.PartitionProduceData(index=i, records=bytes([i + 1]) * size if size else None)
                    for i, size in enumerate(sizes)
                ],
            )
            for t in range(2)
        ],
    )
    data = msg.encode(version)
    _check(Produce, msg, version)
    # every byte but the insides of the longer record sets
    payload = {
        j
        for size in (300, 16384)
        for k in _all(data, bytes([sizes.index(size) + 1]) * size)
        for j in range(k + 2, k + size - 2)
    }
    _agree(Produce, version, data, [at for at in range(len(data)) if at not in payload])


def _all(data: bytes, part: bytes):
    at = data.find(part)
    while at >= 0:
        yield at
        at = data.find(part, at + len(part))


@pytest.mark.parametrize("version", [9, 12])
def test_topic_names_followed_by_fixed_fields_on_corrupted_input(version):
    # a metadata topic's name is followed by its id and flags (a fixed run): the run's read checks the name's end
    topics = [_topic(_partitions(2, version=version), version) for _ in range(2)]
    msg = Metadata(topics=[t.topics[0] for t in topics])
    data = msg.encode(version)
    _agree(Metadata, version, data, list(range(len(data))))
