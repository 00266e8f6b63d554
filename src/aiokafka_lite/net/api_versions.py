"""The highest version of each Kafka API that this client's logic implements.

The generated codec (``aiokafka_lite.wire.messages``) encodes every version in Kafka's
schemas, and regenerating it from a newer Kafka raises its ``MAX_VERSION``s. A new
version can change what a request means, not only its fields (Produce v13 and
TxnOffsetCommit v6 name topics by ID, ApiVersions v5 asks the broker to check the
cluster it belongs to), so the client never negotiates past what its own logic was
written for: ``negotiate_version`` takes the smaller of this table's version, the
broker's and any ``max_versions`` cap from the config. The lowest version stays the
codec's ``MIN_VERSION``.

An API missing from the table is not spoken by the client at all; whoever implements
one adds it here together with the logic. Each version is at most the codec's maximum
(tests/wire/test_api_versions.py checks); where it is lower, the comment says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["CLIENT_API_VERSIONS", "IMPLEMENTED_APIS"]

#: (API key, API name, highest version implemented), by API key.
IMPLEMENTED_APIS: Final[tuple[tuple[int, str, int], ...]] = (
    (0, "Produce", 13),
    (1, "Fetch", 18),
    (2, "ListOffsets", 11),
    (3, "Metadata", 13),
    (8, "OffsetCommit", 10),
    (9, "OffsetFetch", 10),
    (10, "FindCoordinator", 6),
    (11, "JoinGroup", 9),
    (12, "Heartbeat", 4),
    (13, "LeaveGroup", 5),
    (14, "SyncGroup", 5),
    (15, "DescribeGroups", 6),
    (16, "ListGroups", 5),
    (17, "SaslHandshake", 1),
    # v5 sends the cluster and node ids the client expects, for the broker to check
    # (answered with REBOOTSTRAP_REQUIRED on a mismatch); the client does not send them
    # (v4). REBOOTSTRAP_REQUIRED in a Metadata answer (v13) is handled: net/rebootstrap.py.
    (18, "ApiVersions", 4),
    (19, "CreateTopics", 7),
    (20, "DeleteTopics", 6),
    (21, "DeleteRecords", 2),
    (22, "InitProducerId", 6),
    (23, "OffsetForLeaderEpoch", 4),
    # The transactional producer (produce/transaction.py) chooses lower versions by the
    # cluster's finalized transaction.version (KIP-890): at level >= 2 it sends EndTxn v5 and
    # TxnOffsetCommit v5 and no AddPartitionsToTxn/AddOffsetsToTxn; below, EndTxn and
    # TxnOffsetCommit up to v4 and AddPartitionsToTxn up to v3 (v4+ are broker-to-broker).
    # Its InitProducerId stays at v5 (v6 is KIP-939's two-phase commit).
    (24, "AddPartitionsToTxn", 5),
    (25, "AddOffsetsToTxn", 4),
    (26, "EndTxn", 5),
    (27, "WriteTxnMarkers", 2),
    # v6 names topics by ID instead of by name; the transactional producer sends names.
    (28, "TxnOffsetCommit", 5),
    (29, "DescribeAcls", 3),
    (30, "CreateAcls", 3),
    (31, "DeleteAcls", 3),
    (32, "DescribeConfigs", 4),
    (33, "AlterConfigs", 2),
    (34, "AlterReplicaLogDirs", 2),
    (35, "DescribeLogDirs", 5),
    (36, "SaslAuthenticate", 2),
    (37, "CreatePartitions", 3),
    (38, "CreateDelegationToken", 3),
    (39, "RenewDelegationToken", 2),
    (40, "ExpireDelegationToken", 2),
    (41, "DescribeDelegationToken", 3),
    # v3 adds a per-group error message that the admin client does not report yet.
    (42, "DeleteGroups", 2),
    (43, "ElectLeaders", 2),
    (44, "IncrementalAlterConfigs", 1),
    (45, "AlterPartitionReassignments", 1),
    (46, "ListPartitionReassignments", 0),
    (47, "OffsetDelete", 0),
    (48, "DescribeClientQuotas", 1),
    (49, "AlterClientQuotas", 1),
    (50, "DescribeUserScramCredentials", 0),
    (51, "AlterUserScramCredentials", 0),
    (55, "DescribeQuorum", 2),
    (57, "UpdateFeatures", 2),
    (60, "DescribeCluster", 2),
    (61, "DescribeProducers", 0),
    (64, "UnregisterBroker", 0),
    (65, "DescribeTransactions", 0),
    (66, "ListTransactions", 2),
    (68, "ConsumerGroupHeartbeat", 1),
    (69, "ConsumerGroupDescribe", 1),
    (71, "GetTelemetrySubscriptions", 0),
    (72, "PushTelemetry", 0),
    (74, "ListConfigResources", 1),
    (75, "DescribeTopicPartitions", 0),
    (76, "ShareGroupHeartbeat", 1),
    (77, "ShareGroupDescribe", 1),
    # v2 (KIP-1206/1222) adds the acquire mode, sent, and renew acknowledgements, never sent.
    (78, "ShareFetch", 2),
    (79, "ShareAcknowledge", 2),
    # KIP-853 dynamic voters (admin/quorum.py); v1 of AddRaftVoter adds AckWhenCommitted,
    # left at its default (true), as Java's Admin does.
    (80, "AddRaftVoter", 1),
    (81, "RemoveRaftVoter", 0),
    # KIP-1071 (admin/streams_groups.py); v1 adds IncludeTopologyDescription, left false.
    (89, "StreamsGroupDescribe", 1),
    # v1 adds the lag of each share-partition.
    (90, "DescribeShareGroupOffsets", 1),
    (91, "AlterShareGroupOffsets", 0),
    (92, "DeleteShareGroupOffsets", 0),
    (94, "UnregisterController", 0),
)

#: API key -> highest version the client implements.
CLIENT_API_VERSIONS: Final[Mapping[int, int]] = MappingProxyType(
    {key: version for key, _, version in IMPLEMENTED_APIS}
)
