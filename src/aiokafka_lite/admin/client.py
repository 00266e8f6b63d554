"""``Admin``: topic, config, group, offset and record administration.

Routing follows the Java admin client: topic creation/deletion and partition changes go
to the controller (any broker in KRaft clusters, which forwards), broker configs to
that broker, group operations to each group's coordinator, offset and record
operations to each partition's leader, split per broker and merged. Retriable errors
are retried (refreshing metadata or rediscovering coordinators as the error asks)
until the call's ``timeout_ms`` (default ``default_timeout_ms``, 60 s as in Java's
``default.api.timeout.ms``); what still fails is reported per item.

``Admin`` holds no protocol code: each method is an operation (a small function in
topics.py, configs.py, groups.py, records.py, consumer_groups.py, share_groups.py, quorum.py) over
the public request/route API of ``admin/requests.py`` (``Admin.requests``), which new
operations use the same way.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from aiokafka_lite.admin import acls as _acls
from aiokafka_lite.admin import configs as _configs
from aiokafka_lite.admin import consumer_groups as _consumer_groups
from aiokafka_lite.admin import credentials as _credentials
from aiokafka_lite.admin import features as _features
from aiokafka_lite.admin import group_members as _group_members
from aiokafka_lite.admin import groups as _groups
from aiokafka_lite.admin import quorum as _quorum
from aiokafka_lite.admin import quotas as _quotas
from aiokafka_lite.admin import records as _records
from aiokafka_lite.admin import replicas as _replicas
from aiokafka_lite.admin import share_groups as _share_groups
from aiokafka_lite.admin import streams_groups as _streams_groups
from aiokafka_lite.admin import topics as _topics
from aiokafka_lite.admin import transactions as _transactions
from aiokafka_lite.admin.acls import DeleteAclsResult
from aiokafka_lite.admin.consumer_groups import ConsumerGroupDescription
from aiokafka_lite.admin.requests import AdminRequests, Route
from aiokafka_lite.admin.share_groups import ShareGroupDescription, ShareGroupOffset
from aiokafka_lite.admin.streams_groups import StreamsGroupDescription
from aiokafka_lite.admin.types import (
    AlterConfigOp,
    ClusterDescription,
    ConfigDescription,
    ConfigResource,
    ConfigResourceType,
    CreateTopicResult,
    DeleteRecordsResult,
    GroupDescription,
    GroupOffset,
    ListGroupsResult,
    ListOffsetsResult,
    NewTopic,
    OffsetSpec,
    QuorumInfo,
    RaftVoterEndpoint,
    Result,
    Results,
    TopicDescription,
    TopicListing,
)
from aiokafka_lite.core import errors as E
from aiokafka_lite.core.acls import AclBinding, AclBindingFilter
from aiokafka_lite.core.client_metrics import track
from aiokafka_lite.core.health import Health, build_health
from aiokafka_lite.core.structs import TopicPartition
from aiokafka_lite.net.client import Client
from aiokafka_lite.net.client_config import ClientConfig
from aiokafka_lite.wire.message import Request, Response

__all__ = ["Admin"]


class Admin:
    """Cluster administration over a (shared or owned) ``Client``.

    ``async with Admin("127.0.0.1:9092") as admin: ...``, or ``Admin(client=shared)``
    to reuse a Producer's/Consumer's client (then closing the Admin leaves it open).
    Each method is an operation over the admin's request API (``requests``,
    ``AdminRequests`` in admin/requests.py), in the module of its kind: topics.py,
    configs.py, groups.py, records.py, consumer_groups.py, share_groups.py.
    Extra keyword options are ``ClientConfig`` options for an owned client; an owned
    client never auto-creates topics through metadata requests.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        client: Client | None = None,
        config: ClientConfig | None = None,
        default_timeout_ms: float = 60_000,
        **options: Any,
    ) -> None:
        if default_timeout_ms <= 0:
            raise E.ConfigError("default_timeout_ms must be > 0")
        if client is not None:
            if bootstrap_servers is not None or config is not None or options:
                raise E.ConfigError("pass either client= or bootstrap servers/options, not both")
            self._client = client
            self._owns_client = False
        else:
            if bootstrap_servers is None:
                raise E.ConfigError("Admin needs bootstrap_servers or client=")
            if config is None:
                options.setdefault("allow_auto_topic_creation", False)
            self._client = Client(bootstrap_servers, config=config, **options)
            self._owns_client = True
        self._requests = AdminRequests(self._client, default_timeout_ms)
        self._started = False
        self._closed = False
        track(self)

    @property
    def client(self) -> Client:
        return self._client

    @property
    def requests(self) -> AdminRequests:
        """The request and routing API the operations are built on (admin/requests.py)."""
        return self._requests

    @property
    def default_timeout_ms(self) -> float:
        """The deadline of a call that gives no ``timeout_ms``."""
        return self._requests.default_timeout_ms

    @default_timeout_ms.setter
    def default_timeout_ms(self, value: float) -> None:
        self._requests.default_timeout_ms = value

    @property
    def closed(self) -> bool:
        return self._closed or self._client.closed

    async def start(self) -> None:
        await self._client.start()
        self._started = True

    async def close(self) -> None:
        self._closed = True
        if self._owns_client:
            await self._client.close()

    def metrics(self) -> dict[str, Any]:
        """The client's metrics (per broker counters, retries, errors)."""
        return {"client": self._client.metrics()}

    def health(self) -> Health:
        """Readiness summary (rules in ``aiokafka_lite.core.health``): started and a broker reachable."""
        return build_health(
            "admin",
            self._client.metrics(),
            self._client.config.client_id,
            started=self._started,
            closed=self.closed,
        )

    async def __aenter__(self) -> Admin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ requests

    async def request(
        self, make: Callable[[int], Request], route: Route = "any", *, timeout_ms: float | None = None
    ) -> Response:
        """Send one request built by ``make(version)`` (for the version the broker
        negotiated) to ``route``: a node id, ``"controller"`` or ``"any"`` (least loaded).
        Retriable failures are retried until ``timeout_ms`` (default ``default_timeout_ms``);
        error codes inside the response are the caller's."""
        rq = self._requests
        return await rq.request(make, route, rq.deadline(timeout_ms))

    # ------------------------------------------------------------------ topics

    async def create_topics(
        self,
        topics: Sequence[NewTopic],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[str, CreateTopicResult]:
        """Create topics; existing ones fail per item with ``TopicAlreadyExistsError``."""
        return await _topics.create_topics(
            self._requests, topics, validate_only=validate_only, timeout_ms=timeout_ms
        )

    async def delete_topics(
        self, names: Iterable[str], *, timeout_ms: float | None = None
    ) -> Results[str, Result]:
        return await _topics.delete_topics(self._requests, names, timeout_ms=timeout_ms)

    async def create_partitions(
        self,
        new_totals: Mapping[str, int],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[str, Result]:
        """Grow topics to ``new_totals[topic]`` partitions in total."""
        return await _topics.create_partitions(
            self._requests, new_totals, validate_only=validate_only, timeout_ms=timeout_ms
        )

    async def list_topics(
        self, *, include_internal: bool = False, timeout_ms: float | None = None
    ) -> dict[str, TopicListing]:
        return await _topics.list_topics(
            self._requests, include_internal=include_internal, timeout_ms=timeout_ms
        )

    async def describe_topics(
        self,
        names: Iterable[str],
        *,
        include_authorized_operations: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[str, TopicDescription]:
        """Partitions, leaders and replicas per topic; unknown topics fail per item.
        ``include_authorized_operations=True`` also asks which operations the client's
        principal may do on each (``TopicDescription.authorized_operations``)."""
        return await _topics.describe_topics(
            self._requests,
            names,
            include_authorized_operations=include_authorized_operations,
            timeout_ms=timeout_ms,
        )

    async def describe_cluster(
        self, *, include_authorized_operations: bool = False, timeout_ms: float | None = None
    ) -> ClusterDescription:
        """Brokers, controller and cluster id; ``include_authorized_operations=True``
        also asks which CLUSTER operations the client's principal may do
        (``ClusterDescription.authorized_operations``, None when not asked)."""
        return await _topics.describe_cluster(
            self._requests, include_authorized_operations=include_authorized_operations, timeout_ms=timeout_ms
        )

    # ------------------------------------------------------------------ configs

    async def describe_configs(
        self,
        resources: Iterable[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[ConfigResource, ConfigDescription]:
        return await _configs.describe_configs(
            self._requests,
            resources,
            include_synonyms=include_synonyms,
            include_documentation=include_documentation,
            timeout_ms=timeout_ms,
        )

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp] | Mapping[str, str | None]],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[ConfigResource, Result]:
        """Apply config operations; a ``{name: value}`` mapping means SET (DELETE for None)."""
        return await _configs.incremental_alter_configs(
            self._requests, changes, validate_only=validate_only, timeout_ms=timeout_ms
        )

    # ------------------------------------------------------------------ groups

    async def list_groups(
        self,
        *,
        states: Iterable[str] | None = None,
        types: Iterable[str] | None = None,
        timeout_ms: float | None = None,
    ) -> ListGroupsResult:
        """Groups known to every broker (each is the coordinator of some); filters are
        applied by the broker when it supports them, else here."""
        return await _groups.list_groups(self._requests, states=states, types=types, timeout_ms=timeout_ms)

    async def describe_groups(
        self,
        group_ids: Iterable[str],
        *,
        include_authorized_operations: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[str, GroupDescription]:
        return await _groups.describe_groups(
            self._requests,
            group_ids,
            include_authorized_operations=include_authorized_operations,
            timeout_ms=timeout_ms,
        )

    async def delete_groups(
        self, group_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> Results[str, Result]:
        """Delete empty groups (and their committed offsets); busy groups fail per item."""
        return await _groups.delete_groups(self._requests, group_ids, timeout_ms=timeout_ms)

    async def list_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[TopicPartition, GroupOffset]:
        """Committed offsets of a group (all its partitions when ``partitions`` is None).

        Group-level failures (authorization, unknown coordinator after retries) raise.
        """
        return await _groups.list_group_offsets(
            self._requests, group_id, partitions, require_stable=require_stable, timeout_ms=timeout_ms
        )

    async def alter_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | GroupOffset],
        *,
        timeout_ms: float | None = None,
    ) -> Results[TopicPartition, Result]:
        """Commit offsets for a group that has no active members (e.g. to rewind it)."""
        return await _groups.alter_group_offsets(self._requests, group_id, offsets, timeout_ms=timeout_ms)

    # ------------------------------------------------------------------ offsets & records (by leader)

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, OffsetSpec | int | str],
        *,
        isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted",
        timeout_ms: float | None = None,
    ) -> Results[TopicPartition, ListOffsetsResult]:
        """Offsets by spec: ``"earliest"``/``"latest"``/``"max_timestamp"``, an
        ``OffsetSpec``, or a timestamp in ms (first offset with a timestamp >= it)."""
        return await _records.list_offsets(
            self._requests, specs, isolation_level=isolation_level, timeout_ms=timeout_ms
        )

    async def delete_records(
        self, before: Mapping[TopicPartition, int], *, timeout_ms: float | None = None
    ) -> Results[TopicPartition, DeleteRecordsResult]:
        """Delete records below ``before[tp]`` (-1: up to the high watermark)."""
        return await _records.delete_records(self._requests, before, timeout_ms=timeout_ms)

    # ------------------------------------------------------------------ consumer groups (both protocols)

    async def list_consumer_groups(
        self,
        *,
        states: Iterable[str] | None = None,
        types: Iterable[str] = ("classic", "consumer"),
        timeout_ms: float | None = None,
    ) -> ListGroupsResult:
        """Consumer groups of either protocol (ListGroups filtered by type); ``types``
        narrows it to ``["consumer"]`` or ``["classic"]``."""
        return await _consumer_groups.list_consumer_groups(
            self._requests, states=states, types=types, timeout_ms=timeout_ms
        )

    async def describe_consumer_groups(
        self,
        group_ids: Iterable[str],
        *,
        include_authorized_operations: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[str, ConsumerGroupDescription]:
        """Describe consumer groups of either protocol (see the module docstring)."""
        return await _consumer_groups.describe_consumer_groups(
            self._requests,
            group_ids,
            include_authorized_operations=include_authorized_operations,
            timeout_ms=timeout_ms,
        )

    async def remove_members_from_consumer_group(
        self,
        group_id: str,
        group_instance_ids: Iterable[str] | None = None,
        *,
        reason: str | None = None,
        timeout_ms: float | None = None,
    ) -> Results[str, Result]:
        """Remove static members (by ``group.instance.id``) from a group, or every member
        when ``group_instance_ids`` is None (Java's ``removeAll()``), so their partitions
        move now rather than after ``session.timeout.ms``. Results per member; a
        group-level error raises. See admin/group_members.py."""
        return await _group_members.remove_members_from_consumer_group(
            self._requests, group_id, group_instance_ids, reason=reason, timeout_ms=timeout_ms
        )

    # ------------------------------------------------------------------ share groups (KIP-932)

    async def list_share_groups(
        self, *, states: Iterable[str] | None = None, timeout_ms: float | None = None
    ) -> ListGroupsResult:
        """Share groups of the cluster (ListGroups filtered by type ``share``), optionally
        only those in ``states`` ("Empty", "Stable")."""
        return await _share_groups.list_share_groups(self._requests, states=states, timeout_ms=timeout_ms)

    async def describe_share_groups(
        self,
        group_ids: Iterable[str],
        *,
        include_authorized_operations: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[str, ShareGroupDescription]:
        """Members, assignments, epochs and state of share groups. A group that does not
        exist, or is not a share group, fails with ``GroupIdNotFoundError``."""
        return await _share_groups.describe_share_groups(
            self._requests,
            group_ids,
            include_authorized_operations=include_authorized_operations,
            timeout_ms=timeout_ms,
        )

    async def delete_share_groups(
        self, group_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> Results[str, Result]:
        """Deletes empty share groups with their share-partition state (DeleteGroups); a
        group with members fails with ``NonEmptyGroupError``. Group configs stay, as in Kafka."""
        return await _share_groups.delete_share_groups(self._requests, group_ids, timeout_ms=timeout_ms)

    async def list_share_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> Results[TopicPartition, ShareGroupOffset]:
        """Start offset (and lag) of each share-partition of a group: all those it has
        initialized when ``partitions`` is None. An unknown group has none. Group-level
        failures raise."""
        return await _share_groups.list_share_group_offsets(
            self._requests, group_id, partitions, timeout_ms=timeout_ms
        )

    async def alter_share_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: float | None = None,
    ) -> Results[TopicPartition, Result]:
        """Sets the start offset of share-partitions (records before it count as done; -1
        resets to ``share.auto.offset.reset``). Kafka allows it only while the group has no
        members: otherwise every partition fails with ``NonEmptyGroupError``. Creates the
        group when it does not exist yet."""
        return await _share_groups.alter_share_group_offsets(
            self._requests, group_id, offsets, timeout_ms=timeout_ms
        )

    async def delete_share_group_offsets(
        self, group_id: str, topics: Iterable[str], *, timeout_ms: float | None = None
    ) -> Results[str, Result]:
        """Forgets a share group's state for whole topics (the next consumer starts at
        ``share.auto.offset.reset``). Only while the group has no members; an unknown
        group fails with ``GroupIdNotFoundError``, an unknown topic per item."""
        return await _share_groups.delete_share_group_offsets(
            self._requests, group_id, topics, timeout_ms=timeout_ms
        )

    # ------------------------------------------------------------------ streams groups (KIP-1071)

    async def list_streams_groups(
        self, *, states: Iterable[str] | None = None, timeout_ms: float | None = None
    ) -> ListGroupsResult:
        """Streams groups of the cluster (ListGroups filtered by type ``streams``),
        optionally only those in ``states``."""
        return await _streams_groups.list_streams_groups(self._requests, states=states, timeout_ms=timeout_ms)

    async def describe_streams_groups(
        self,
        group_ids: Iterable[str],
        *,
        include_authorized_operations: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[str, StreamsGroupDescription]:
        """State, epochs, topology and members (process, client, tasks) of Kafka Streams
        groups (``group.protocol=streams``). A group that does not exist, or is not a
        streams group, fails with ``GroupIdNotFoundError``; see admin/streams_groups.py."""
        return await _streams_groups.describe_streams_groups(
            self._requests,
            group_ids,
            include_authorized_operations=include_authorized_operations,
            timeout_ms=timeout_ms,
        )

    async def list_streams_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[TopicPartition, GroupOffset]:
        """Committed offsets of a streams group (OffsetFetch, as Java). Group-level
        failures raise."""
        return await _streams_groups.list_streams_group_offsets(
            self._requests, group_id, partitions, require_stable=require_stable, timeout_ms=timeout_ms
        )

    async def alter_streams_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int | GroupOffset],
        *,
        timeout_ms: float | None = None,
    ) -> Results[TopicPartition, Result]:
        """Commit offsets for a streams group whose application is stopped (OffsetCommit)."""
        return await _streams_groups.alter_streams_group_offsets(
            self._requests, group_id, offsets, timeout_ms=timeout_ms
        )

    async def delete_streams_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], *, timeout_ms: float | None = None
    ) -> Results[TopicPartition, Result]:
        """Delete a streams group's committed offsets of ``partitions`` (OffsetDelete)."""
        return await _streams_groups.delete_streams_group_offsets(
            self._requests, group_id, partitions, timeout_ms=timeout_ms
        )

    async def delete_streams_groups(
        self, group_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> Results[str, Result]:
        """Delete empty streams groups and their offsets (DeleteGroups); a group with
        members fails with ``NonEmptyGroupError``. Internal topics stay, as in Java."""
        return await _streams_groups.delete_streams_groups(self._requests, group_ids, timeout_ms=timeout_ms)

    # ------------------------------------------------------------------ KRaft quorum

    async def describe_metadata_quorum(self, *, timeout_ms: float | None = None) -> QuorumInfo:
        """The KRaft metadata quorum (Java's ``describeMetadataQuorum``): leader, epoch,
        high watermark, voters and observers with their log end offsets and fetch times,
        and (Kafka 3.9+) the voters' endpoints. See admin/quorum.py."""
        return await _quorum.describe_metadata_quorum(self._requests, timeout_ms=timeout_ms)

    async def add_raft_voter(
        self,
        voter_id: int,
        voter_directory_id: uuid.UUID | str,
        endpoints: Iterable[RaftVoterEndpoint],
        *,
        cluster_id: str | None = None,
        timeout_ms: float | None = None,
    ) -> None:
        """Add a controller (running as an observer) to a dynamic quorum's voters
        (KIP-853); ``UnsupportedVersionError`` on a static quorum."""
        await _quorum.add_raft_voter(
            self._requests,
            voter_id,
            voter_directory_id,
            endpoints,
            cluster_id=cluster_id,
            timeout_ms=timeout_ms,
        )

    async def remove_raft_voter(
        self,
        voter_id: int,
        voter_directory_id: uuid.UUID | str,
        *,
        cluster_id: str | None = None,
        timeout_ms: float | None = None,
    ) -> None:
        """Remove a controller from a dynamic quorum's voters (KIP-853);
        ``UnsupportedVersionError`` on a static quorum."""
        await _quorum.remove_raft_voter(
            self._requests, voter_id, voter_directory_id, cluster_id=cluster_id, timeout_ms=timeout_ms
        )

    async def unregister_controller(self, controller_id: int, *, timeout_ms: float | None = None) -> None:
        """Remove the registration of a controller that left the voters and was shut
        down (Java's ``unregisterController``, Kafka 4.4+)."""
        await _quorum.unregister_controller(self._requests, controller_id, timeout_ms=timeout_ms)

    # ------------------------------------------------------------------ ACLs and authorized operations

    async def create_acls(
        self, bindings: Iterable[AclBinding], *, timeout_ms: float | None = None
    ) -> Results[AclBinding, Result]:
        """Create ACL bindings (Java's ``createAcls``); per binding, ``Result()`` or its
        error (``InvalidRequestError`` for one the broker refuses). A broker without an
        authorizer answers ``SecurityDisabledError``; a principal without ALTER on the
        cluster ``ClusterAuthorizationFailedError`` (admin/acls.py)."""
        return await _acls.create_acls(self._requests, bindings, timeout_ms=timeout_ms)

    async def describe_acls(
        self, acl_filter: AclBindingFilter | None = None, *, timeout_ms: float | None = None
    ) -> list[AclBinding]:
        """The ACL bindings ``acl_filter`` matches (Java's ``describeAcls``; default all)."""
        return await _acls.describe_acls(self._requests, acl_filter, timeout_ms=timeout_ms)

    async def delete_acls(
        self, filters: Iterable[AclBindingFilter], *, timeout_ms: float | None = None
    ) -> Results[AclBindingFilter, DeleteAclsResult]:
        """Delete the ACL bindings each filter matches (Java's ``deleteAcls``); per
        filter, the bindings it deleted or its error."""
        return await _acls.delete_acls(self._requests, filters, timeout_ms=timeout_ms)

    # ------------------------------------------------------------------ SCRAM users, client quotas, delegation tokens

    async def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> Results[str, _credentials.UserScramCredentialsDescription]:
        """Each user's SCRAM mechanisms and iterations (never secrets), for ``users`` or
        (None) every user with a credential; an unknown user's result carries
        ``ResourceNotFoundError``. See admin/credentials.py."""
        return await _credentials.describe_user_scram_credentials(
            self._requests, users, timeout_ms=timeout_ms
        )

    async def alter_user_scram_credentials(
        self,
        alterations: Sequence[_credentials.UserScramCredentialAlteration],
        *,
        timeout_ms: float | None = None,
    ) -> Results[str, Result]:
        """Upsert (``UserScramCredentialUpsertion``: salted and hashed here, as Java) and
        delete (``UserScramCredentialDeletion``) SCRAM credentials; one result per user."""
        return await _credentials.alter_user_scram_credentials(
            self._requests, alterations, timeout_ms=timeout_ms
        )

    async def describe_client_quotas(
        self, quota_filter: _quotas.ClientQuotaFilter | None = None, *, timeout_ms: float | None = None
    ) -> dict[_quotas.ClientQuotaEntity, dict[str, float]]:
        """Quotas of the entities the filter matches (default: all): entity -> key -> value.
        See admin/quotas.py."""
        return await _quotas.describe_client_quotas(self._requests, quota_filter, timeout_ms=timeout_ms)

    async def alter_client_quotas(
        self,
        alterations: Sequence[_quotas.ClientQuotaAlteration],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[_quotas.ClientQuotaEntity, Result]:
        """Set or remove quota keys per entity; one result per entity."""
        return await _quotas.alter_client_quotas(
            self._requests, alterations, validate_only=validate_only, timeout_ms=timeout_ms
        )

    async def create_delegation_token(
        self,
        renewers: Iterable[str] = (),
        max_lifetime_ms: int = -1,
        owner: str | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> _credentials.DelegationToken:
        """A new delegation token of ``owner`` (default: the caller), renewable by
        ``renewers`` (``"User:name"``). Needs a SASL-authenticated, not token-authenticated
        connection (else ``DelegationTokenRequestNotAllowedError``)."""
        return await _credentials.create_delegation_token(
            self._requests, renewers, max_lifetime_ms, owner, timeout_ms=timeout_ms
        )

    async def renew_delegation_token(
        self, hmac: bytes, renew_period_ms: int = -1, *, timeout_ms: float | None = None
    ) -> int:
        """Extend a token's expiry (owner or renewer only); the new expiry timestamp."""
        return await _credentials.renew_delegation_token(
            self._requests, hmac, renew_period_ms, timeout_ms=timeout_ms
        )

    async def expire_delegation_token(
        self, hmac: bytes, expiry_time_period_ms: int = -1, *, timeout_ms: float | None = None
    ) -> int:
        """Set a token's expiry to now + the period (negative: at once); the new expiry timestamp."""
        return await _credentials.expire_delegation_token(
            self._requests, hmac, expiry_time_period_ms, timeout_ms=timeout_ms
        )

    async def describe_delegation_token(
        self, owners: Iterable[str] | None = None, *, timeout_ms: float | None = None
    ) -> list[_credentials.DelegationToken]:
        """The tokens of ``owners`` (None: all) the caller may describe."""
        return await _credentials.describe_delegation_token(self._requests, owners, timeout_ms=timeout_ms)

    # ------------------------------------------------------------------ transactions and producers (KIP-664)

    async def list_transactions(
        self,
        *,
        states: Iterable[str | _transactions.TransactionState] | None = None,
        producer_ids: Iterable[int] | None = None,
        duration_filter_ms: int | None = None,
        transactional_id_pattern: str | None = None,
        timeout_ms: float | None = None,
    ) -> _transactions.ListTransactionsResult:
        """Transactions of every broker's coordinator (Java's ``listTransactions``),
        filtered by state, producer id, (Kafka 3.8+) open longer than
        ``duration_filter_ms`` and (Kafka 4.1+) ids matching ``transactional_id_pattern``;
        brokers that failed are in ``errors``. See admin/transactions.py."""
        return await _transactions.list_transactions(
            self._requests,
            states=states,
            producer_ids=producer_ids,
            duration_filter_ms=duration_filter_ms,
            transactional_id_pattern=transactional_id_pattern,
            timeout_ms=timeout_ms,
        )

    async def describe_transactions(
        self, transactional_ids: Iterable[str], *, timeout_ms: float | None = None
    ) -> Results[str, _transactions.TransactionDescription]:
        """State, producer id/epoch, timeout, start time and partitions of each
        transactional id, from its coordinator; unknown ids fail per item."""
        return await _transactions.describe_transactions(
            self._requests, transactional_ids, timeout_ms=timeout_ms
        )

    async def describe_producers(
        self,
        partitions: Iterable[TopicPartition],
        *,
        broker_id: int | None = None,
        timeout_ms: float | None = None,
    ) -> Results[TopicPartition, _transactions.PartitionProducerState]:
        """Active producers of each partition (id, epoch, last sequence and timestamp,
        coordinator epoch, open transaction's first offset), from its leader or ``broker_id``."""
        return await _transactions.describe_producers(
            self._requests, partitions, broker_id=broker_id, timeout_ms=timeout_ms
        )

    async def abort_transaction(
        self, spec: _transactions.AbortTransactionSpec, *, timeout_ms: float | None = None
    ) -> None:
        """Abort a hanging transaction on one partition (Java's ``abortTransaction``: an
        ABORT marker written by the partition leader); raises the typed error on failure."""
        await _transactions.abort_transaction(self._requests, spec, timeout_ms=timeout_ms)

    async def fence_producers(
        self,
        transactional_ids: Iterable[str],
        *,
        transaction_timeout_ms: int | None = None,
        timeout_ms: float | None = None,
    ) -> Results[str, _transactions.FenceProducerResult]:
        """Fence the producers of these transactional ids (Java's ``fenceProducers``:
        InitProducerId bumps the epoch, aborting an open transaction); the new id/epoch per id."""
        return await _transactions.fence_producers(
            self._requests,
            transactional_ids,
            transaction_timeout_ms=transaction_timeout_ms,
            timeout_ms=timeout_ms,
        )

    # ------------------------------------------------------------------ replicas, leaders, log dirs, features

    async def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Iterable[int] | None],
        *,
        allow_replication_factor_change: bool = True,
        timeout_ms: float | None = None,
    ) -> Results[TopicPartition, Result]:
        """Move partitions to new replica sets (``{tp: [broker ids]}``, the first the
        preferred leader) or cancel their reassignment (``{tp: None}``); see admin/replicas.py."""
        return await _replicas.alter_partition_reassignments(
            self._requests,
            reassignments,
            allow_replication_factor_change=allow_replication_factor_change,
            timeout_ms=timeout_ms,
        )

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, *, timeout_ms: float | None = None
    ) -> dict[TopicPartition, _replicas.PartitionReassignment]:
        """Reassignments in flight (of ``partitions``, or all): replicas, adding, removing."""
        return await _replicas.list_partition_reassignments(self._requests, partitions, timeout_ms=timeout_ms)

    async def elect_leaders(
        self,
        election_type: _replicas.ElectionType | int,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> Results[TopicPartition, Result]:
        """Preferred or unclean leader election (``partitions`` None: all); a partition
        that needs none fails with ``ElectionNotNeededError``, as in Java."""
        return await _replicas.elect_leaders(self._requests, election_type, partitions, timeout_ms=timeout_ms)

    async def describe_log_dirs(
        self, broker_ids: Iterable[int], *, timeout_ms: float | None = None
    ) -> Results[int, _replicas.BrokerLogDirs]:
        """Each broker's log dirs with their replicas' sizes and offset lags."""
        return await _replicas.describe_log_dirs(self._requests, broker_ids, timeout_ms=timeout_ms)

    async def alter_replica_log_dirs(
        self, assignments: Mapping[_replicas.TopicPartitionReplica, str], *, timeout_ms: float | None = None
    ) -> Results[_replicas.TopicPartitionReplica, Result]:
        """Move replicas between their broker's log dirs (``LogDirNotFoundError`` for a
        dir the broker does not have)."""
        return await _replicas.alter_replica_log_dirs(self._requests, assignments, timeout_ms=timeout_ms)

    async def describe_replica_log_dirs(
        self, replicas: Iterable[_replicas.TopicPartitionReplica], *, timeout_ms: float | None = None
    ) -> Results[_replicas.TopicPartitionReplica, _replicas.ReplicaLogDirInfo]:
        """The current (and future) log dir of each replica, from DescribeLogDirs as Java."""
        return await _replicas.describe_replica_log_dirs(self._requests, replicas, timeout_ms=timeout_ms)

    async def describe_features(self, *, timeout_ms: float | None = None) -> _features.FeatureMetadata:
        """Finalized and supported feature levels and the finalized epoch (ApiVersions)."""
        return await _features.describe_features(self._requests, timeout_ms=timeout_ms)

    async def update_features(
        self,
        updates: Mapping[str, _features.FeatureUpdate],
        *,
        validate_only: bool = False,
        timeout_ms: float | None = None,
    ) -> Results[str, Result]:
        """Upgrade or downgrade finalized feature levels, all or none (``validate_only``:
        the controller's dry run); see admin/features.py."""
        return await _features.update_features(
            self._requests, updates, validate_only=validate_only, timeout_ms=timeout_ms
        )

    async def unregister_broker(self, broker_id: int, *, timeout_ms: float | None = None) -> None:
        """Forget a broker that was shut down for good (Java's ``unregisterBroker``)."""
        await _replicas.unregister_broker(self._requests, broker_id, timeout_ms=timeout_ms)

    async def list_config_resources(
        self, types: Iterable[ConfigResourceType | int] | None = None, *, timeout_ms: float | None = None
    ) -> list[ConfigResource]:
        """Resources that have configs, of ``types`` (None: all the broker lists;
        KIP-1142, Kafka 4.1+; older brokers list client metrics subscriptions only)."""
        return await _replicas.list_config_resources(self._requests, types, timeout_ms=timeout_ms)

    async def delete_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], *, timeout_ms: float | None = None
    ) -> Results[TopicPartition, Result]:
        """Delete a group's committed offsets (OffsetDelete); a partition of a topic the
        group is subscribed to fails with ``GroupSubscribedToTopicError``."""
        return await _replicas.delete_consumer_group_offsets(
            self._requests, group_id, partitions, timeout_ms=timeout_ms
        )
