"""``EmbeddedCluster``: a Kafka-compatible cluster of N brokers in this event loop.

    async with EmbeddedCluster(brokers=3) as cluster:
        producer = Producer(bootstrap_servers=cluster.bootstrap)
        cluster.inject_error(ProduceRequest, NotLeaderOrFollowerError.code, count=2)
        await cluster.stop_broker(2)

All brokers share one ``ClusterState`` (topics, logs, coordinators); each has its own
listener. The control methods below are the fault-injection toolkit for reliability
tests, modelled on franz-go kfake's control functions.
"""

from __future__ import annotations

import importlib
import logging
import os
import ssl
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self

from aiokafka_lite.broker.api import register_core_handlers
from aiokafka_lite.broker.api.acls import install_authorization
from aiokafka_lite.broker.authorizer import Authorizer
from aiokafka_lite.broker.context import HandlerRegistry, Service
from aiokafka_lite.broker.credentials import CredentialStore, credential_store
from aiokafka_lite.broker.faults import Faults, Observer, RequestRecorder
from aiokafka_lite.broker.sasl import ServerOAuthBearer, ServerPlain, ServerScram, TokenValidator
from aiokafka_lite.broker.server import BrokerServer, MechanismFactory, SaslSettings
from aiokafka_lite.broker.state import SUPPORTED_FEATURES, BrokerConfig, BrokerInfo, ClusterState, Topic
from aiokafka_lite.broker.storage import FsyncPolicy, Storage
from aiokafka_lite.core.errors import ConfigError, IllegalStateError, UnknownTopicOrPartitionError
from aiokafka_lite.wire.message import Request

__all__ = ["DEFAULT_SASL_MECHANISMS", "EmbeddedCluster"]

log = logging.getLogger("aiokafka_lite.broker")

DEFAULT_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
ApiKey = int | type[Request]

# Optional parts: (module, registration function). Each is called with (registry, state),
# in this order (the share admin wraps the group coordinator's ListGroups/DeleteGroups and
# reads the share groups).
_OPTIONAL_PARTS = (
    ("aiokafka_lite.broker.groups", "register_group_handlers"),
    ("aiokafka_lite.broker.transactions", "register_txn_handlers"),
    ("aiokafka_lite.broker.share.groups", "register_share_handlers"),
    ("aiokafka_lite.broker.share.admin", "register_share_admin_handlers"),
)


def _key(api_key: ApiKey | None) -> int | None:
    if api_key is None or isinstance(api_key, int):
        return api_key
    return api_key.API_KEY


class EmbeddedCluster:
    """An in-process Kafka-compatible cluster for development and tests.

    ``port=0`` gives every broker a free port; a fixed ``port`` gives broker *i* (0-based)
    ``port + i``. Broker ids are 1..``brokers``. ``topics`` maps names to partition
    counts to create at start. ``sasl_users`` (username -> password) turns on SASL
    (PLAIN and SCRAM-SHA-256/512 by default) on every listener; ``ssl_context`` (a server
    context) turns on TLS. ``data_dir`` makes logs and metadata persist across restarts
    (see ``broker.storage`` for the fsync policy). ``advertised_ports`` (one per broker)
    are the ports Metadata tells clients, when they must connect through a proxy.
    ``features`` sets finalized feature levels (default: Kafka 4.4's, i.e.
    ``{"transaction.version": 2}``); ``features={"transaction.version": 1}`` is a cluster
    whose transaction protocol was set back to version 1 (see :meth:`set_feature`).
    ``schema_registry=True`` also serves an ``EmbeddedSchemaRegistry`` (needs the
    ``[schemas]`` extra) on a free port of ``host`` for the cluster's lifetime; its
    address is :attr:`schema_registry_url`.
    ``oauthbearer_validator`` turns on SASL OAUTHBEARER (alone, or next to the
    ``sasl_mechanisms`` when ``sasl_users`` is given): it gets each bearer token and
    returns the principal, e.g. ``broker.oidc.JwksTokenValidator(jwks_url,
    expected_audience=...)`` for OIDC JWTs. ``connections_max_reauth_ms`` is Kafka's
    ``connections.max.reauth.ms`` (KIP-368): sessions last that long (or until the token
    expires, if sooner), clients re-authenticate on their connections, and a connection
    whose session expired is closed at its next request.
    ``authorizer=True`` enforces ACLs as Kafka's ``StandardAuthorizer`` does (create them
    with ``Admin.create_acls``; :attr:`authorizer` holds them): ``super_users`` are
    principals (``"User:admin"``) allowed everything (Kafka's ``super.users``), and
    ``allow_everyone_if_no_acl_found`` is Kafka's setting of that name (default False).
    A connection's principal is ``User:<SASL user>``, else ``User:CN=...,OU=...`` from a
    verified client certificate (mutual TLS: an ``ssl_context`` with ``CERT_REQUIRED``), else
    ``User:ANONYMOUS``.
    """

    def __init__(
        self,
        brokers: int = 1,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        topics: Mapping[str, int] | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        fsync: FsyncPolicy = "shutdown",
        ssl_context: ssl.SSLContext | None = None,
        sasl_users: Mapping[str, str] | None = None,
        sasl_mechanisms: Sequence[str] = DEFAULT_SASL_MECHANISMS,
        auto_create_topics: bool = True,
        default_partitions: int = 1,
        config: BrokerConfig | None = None,
        cluster_id: str | None = None,
        racks: Sequence[str | None] | None = None,
        advertised_ports: Sequence[int] | None = None,
        features: Mapping[str, int] | None = None,
        schema_registry: bool = False,
        oauthbearer_validator: TokenValidator | None = None,
        connections_max_reauth_ms: int = 0,
        authorizer: bool = False,
        super_users: Sequence[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        if brokers < 1:
            raise ConfigError("a cluster needs at least one broker")
        if racks is not None and len(racks) != brokers:
            raise ConfigError("racks must name one rack (or None) per broker")
        if advertised_ports is not None and len(advertised_ports) != brokers:
            raise ConfigError("advertised_ports must give one port per broker")
        self.config = config or BrokerConfig(
            auto_create_topics=auto_create_topics, default_partitions=default_partitions
        )
        for name, level in (features or {}).items():
            self._check_feature(name, level)
            self.config.features[name] = level
        self.state = ClusterState(self.config, cluster_id=cluster_id)
        self.registry = HandlerRegistry()
        self.faults = Faults()
        self.host = host
        self._initial_topics = dict(topics or {})
        self._data_dir = data_dir
        self._fsync: FsyncPolicy = fsync
        self._sasl = (
            self._sasl_settings(sasl_users, sasl_mechanisms, credential_store(self.state))
            if sasl_users is not None
            else None
        )
        if oauthbearer_validator is not None:
            validator = oauthbearer_validator
            if self._sasl is None:
                self._sasl = SaslSettings({})
            self._sasl.mechanisms = {
                **self._sasl.mechanisms,
                "OAUTHBEARER": lambda: ServerOAuthBearer(validator),
            }
        if self._sasl is not None:
            self._sasl.max_reauth_ms = connections_max_reauth_ms
        self.sasl_users = dict(sasl_users) if sasl_users is not None else None
        self.ssl_context = ssl_context
        self.brokers: list[BrokerServer] = []
        for i in range(brokers):
            node_id = i + 1
            self.state.brokers[node_id] = BrokerInfo(
                node_id, host, port + i if port else 0, racks[i] if racks else None
            )
            self.brokers.append(
                BrokerServer(
                    node_id,
                    self.state,
                    self.registry,
                    self.faults,
                    host=host,
                    port=port + i if port else 0,
                    ssl_context=ssl_context,
                    sasl=self._sasl,
                    advertised_port=advertised_ports[i] if advertised_ports else None,
                )
            )
        self._started = False
        self._services_started: list[Service] = []
        self.optional_parts: dict[str, bool] = {}
        self._want_schema_registry = schema_registry
        # ACLs (broker/authorizer.py): Kafka's StandardAuthorizer with super.users and
        # allow.everyone.if.no.acl.found; enforced once every handler is registered.
        self.authorizer: Authorizer | None = (
            Authorizer(super_users=super_users, allow_everyone_if_no_acl_found=allow_everyone_if_no_acl_found)
            if authorizer
            else None
        )
        if not authorizer and (super_users or allow_everyone_if_no_acl_found):
            raise ConfigError("super_users and allow_everyone_if_no_acl_found need authorizer=True")
        self._schema_registry: Any = None  # EmbeddedSchemaRegistry while running

    @staticmethod
    def _check_feature(name: str, level: int) -> None:
        supported = SUPPORTED_FEATURES.get(name)
        if supported is None:
            raise ConfigError(
                f"unknown feature {name!r} (the embedded broker knows {sorted(SUPPORTED_FEATURES)})"
            )
        if not supported[0] <= level <= supported[1]:
            raise ConfigError(
                f"feature {name} level {level} is outside the supported {supported[0]}..{supported[1]}"
            )

    def set_feature(self, name: str, level: int) -> None:
        """Finalizes feature ``name`` at ``level`` now, as ``kafka-features.sh upgrade`` /
        ``downgrade`` does on a running cluster (e.g. ``transaction.version`` 1 or 2).
        UpdateFeatures requests do the same. Levels are not kept in ``data_dir``: a
        restarted cluster starts at its ``features``."""
        self._check_feature(name, level)
        self.config.features[name] = level
        self.config.features_epoch += 1

    @staticmethod
    def _sasl_settings(
        users: Mapping[str, str], mechanisms: Sequence[str], store: CredentialStore
    ) -> SaslSettings:
        # SCRAM logins read the cluster's credential store (broker/credentials.py), which
        # AlterUserScramCredentials and the delegation-token APIs change while it runs.
        factories: dict[str, MechanismFactory] = {}
        users = dict(users)
        store.sasl_enabled = True
        if any(m.startswith("SCRAM-") for m in mechanisms):
            for user, password in users.items():
                store.add_password(user, password)
            store.enable_tokens()
        for name in mechanisms:
            if name == "PLAIN":
                factories[name] = lambda: ServerPlain(users)
            elif name in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                h: Any = name.removeprefix("SCRAM-")
                factories[name] = lambda h=h: ServerScram(  # type: ignore[misc]
                    store.credentials(h), h, token_credentials=store.token_logins(h)
                )
            else:
                raise ConfigError(f"unsupported SASL mechanism {name!r}")
        return SaslSettings(factories)

    # -- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        try:
            if self._data_dir is not None:
                storage = Storage(self._data_dir, self._fsync)
                storage.load(self.state)
                self.state.storage = storage
            register_core_handlers(self.registry, self.state)
            self._register_optional_parts()
            if self.authorizer is not None:
                install_authorization(self.registry, self.state, self.authorizer)
            for b in self.brokers:
                await b.start(mark_alive=False)
            # All at once, so that loaded partitions keep their leaders.
            self.state.set_brokers_alive([b.node_id for b in self.brokers], True)
            for name, count in self._initial_topics.items():
                if name not in self.state.topics:
                    self.state.create_topic(name, count)
            for svc in list(self.state.services.values()):
                await svc.start()
                self._services_started.append(svc)
            if self._want_schema_registry:
                await self._start_schema_registry()
        except BaseException:
            await self.close()
            raise

    async def _start_schema_registry(self) -> None:
        # Imported here: the registry needs the optional [schemas] extra.
        from aiokafka_lite.integrations.schema_registry.embedded import EmbeddedSchemaRegistry

        registry = EmbeddedSchemaRegistry(host=self.host)
        await registry.start()
        self._schema_registry = registry

    def _register_optional_parts(self) -> None:
        for modname, fname in _OPTIONAL_PARTS:
            try:
                mod = importlib.import_module(modname)
            except ModuleNotFoundError as e:
                if e.name != modname:
                    log.exception("%s failed to import; its APIs are not served", modname)
                else:
                    log.warning(
                        "%s is not available: its APIs are not served by the embedded broker", modname
                    )
                self.optional_parts[modname] = False
                continue
            except Exception:
                log.exception("%s failed to import; its APIs are not served", modname)
                self.optional_parts[modname] = False
                continue
            fn = getattr(mod, fname, None)
            if fn is None:
                log.warning("%s has no %s(): its APIs are not served", modname, fname)
                self.optional_parts[modname] = False
                continue
            fn(self.registry, self.state)
            self.optional_parts[modname] = True

    async def close(self) -> None:
        """Stops brokers and services; with a data dir, syncs and closes the files."""
        if not self._started:
            return
        self._started = False
        # Network first (no request reaches a stopped service), then the services.
        for b in self.brokers:
            await b.stop()
        for svc in reversed(self._services_started):
            try:
                await svc.stop()
            except Exception:
                log.exception("stopping %r failed", svc)
        self._services_started.clear()
        if self._schema_registry is not None:
            registry, self._schema_registry = self._schema_registry, None
            await registry.stop()
        if self.state.storage is not None:
            self.state.storage.close()
            self.state.storage = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- addresses -------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of the running brokers."""
        return ",".join(b.address for b in self.brokers if b.running)

    @property
    def bootstrap_servers(self) -> list[str]:
        return [b.address for b in self.brokers if b.running]

    @property
    def schema_registry_url(self) -> str:
        """``http://host:port`` of the cluster's schema registry (``schema_registry=True``)."""
        if self._schema_registry is None:
            if not self._want_schema_registry:
                raise ConfigError("this cluster has no schema registry: pass schema_registry=True")
            raise IllegalStateError("the cluster's schema registry runs only while the cluster is started")
        return str(self._schema_registry.url)

    def broker(self, node_id: int) -> BrokerServer:
        for b in self.brokers:
            if b.node_id == node_id:
                return b
        raise ConfigError(f"no broker {node_id}")

    # -- topics ----------------------------------------------------------------------
    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
    ) -> Topic:
        return self.state.create_topic(name, partitions, replication_factor, dict(configs or {}))

    def delete_topic(self, name: str) -> None:
        self.state.delete_topic(name)

    def topic(self, name: str) -> Topic:
        t = self.state.get_topic(name)
        if t is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        return t

    def high_watermark(self, topic: str, partition: int) -> int:
        return self.state.require_partition(topic, partition).log.high_watermark

    # -- fault injection -------------------------------------------------------------
    def inject_error(
        self, api_key: ApiKey, error_code: int, count: int | None = 1, *, broker_id: int | None = None
    ) -> None:
        """The next ``count`` requests of ``api_key`` (on ``broker_id`` or any broker) are
        answered with ``error_code`` in every error field of the response, without being
        executed. ``count=None``: until ``clear_faults``."""
        key = _key(api_key)
        assert key is not None
        self.faults.add_error(key, error_code, count, broker_id)

    def add_latency(
        self,
        api_key: ApiKey | None,
        seconds: float,
        count: int | None = None,
        *,
        broker_id: int | None = None,
    ) -> None:
        """Delays the next ``count`` requests of ``api_key`` (``None``: every API) by ``seconds``
        before they are executed. ``count=None``: until ``clear_faults``."""
        self.faults.add_latency(_key(api_key), seconds, count, broker_id)

    def drop_connection(
        self,
        api_key: ApiKey | None,
        count: int | None = 1,
        *,
        broker_id: int | None = None,
        when: Literal["before", "after"] = "before",
    ) -> None:
        """Closes the connection of the next ``count`` requests of ``api_key`` mid-request:
        ``when="before"`` drops it unexecuted, ``"after"`` executes it and loses the response."""
        self.faults.add_drop(_key(api_key), count, broker_id, when)

    def clear_faults(self) -> None:
        """Removes every injected error, latency and drop rule (observers stay)."""
        self.faults.clear()

    def close_connections(self, broker_id: int | None = None) -> None:
        """Abruptly closes every client connection (of one broker, or all)."""
        for b in self.brokers:
            if broker_id is None or b.node_id == broker_id:
                b.close_connections()

    async def stop_broker(self, node_id: int) -> None:
        """Stops a broker like a crash: its connections drop, it vanishes from metadata and
        the partitions it led move to live brokers with a bumped leader epoch."""
        await self.broker(node_id).stop()

    async def kill_broker(self, node_id: int) -> None:
        """Kills a broker the way Apache Kafka sees a SIGKILL: its connections drop and its
        port refuses connections at once, but metadata goes on naming it, as the leader of
        its partitions too, until ``fence_broker`` (Kafka's controller fences a broker
        that stopped heartbeating after ``broker.session.timeout.ms``). Clients that
        refresh metadata in between learn nothing new."""
        await self.broker(node_id).stop(fence=False)

    def fence_broker(self, node_id: int) -> None:
        """The controller's side of ``kill_broker``: the broker leaves metadata and the
        partitions it led move to live brokers under a bumped leader epoch."""
        self.state.set_broker_alive(node_id, False)

    async def start_broker(self, node_id: int) -> None:
        """Restarts a stopped broker on its previous port. Leadership does not move back
        by itself (use ``move_leader``)."""
        if not self._started:
            raise IllegalStateError("the cluster is not running")
        await self.broker(node_id).start()

    async def restart_broker(self, node_id: int) -> None:
        await self.stop_broker(node_id)
        await self.start_broker(node_id)

    def move_leader(self, topic: str, partition: int, broker_id: int | None = None) -> tuple[int, int]:
        """Moves a partition's leadership (default: to the next live broker) and bumps its
        leader epoch. Returns (new leader id, new leader epoch)."""
        p = self.state.require_partition(topic, partition)
        if broker_id is None:
            live = sorted(b.node_id for b in self.state.live_brokers())
            if not live:
                raise IllegalStateError("no live broker")
            later = [b for b in live if b > p.leader_id]
            broker_id = later[0] if later else live[0]
        elif not self.state.is_alive(broker_id):
            raise IllegalStateError(f"broker {broker_id} is not running")
        self.state.set_leader(p, broker_id)
        self.state.changed()
        return p.leader_id, p.leader_epoch

    def expire_group_member(self, group_id: str, member_id: str) -> bool:
        """Expires a consumer group member as if its session timed out (delegates to the
        group coordinator). Returns whether the member existed."""
        svc = self.state.services.get("groups")
        expire = getattr(svc, "expire_member", None)
        if expire is None:
            raise IllegalStateError("the group coordinator is not available in this cluster")
        return bool(expire(group_id, member_id))

    def move_group_coordinator(self, group_id: str, broker_id: int) -> None:
        """Makes ``broker_id`` the coordinator of ``group_id``; the old coordinator answers
        NOT_COORDINATOR from then on, so members must rediscover it."""
        svc = self.state.services.get("groups")
        move = getattr(svc, "move_coordinator", None)
        if move is None:
            raise IllegalStateError("the group coordinator is not available in this cluster")
        move(group_id, broker_id)

    def move_transaction_coordinator(self, transactional_id: str, broker_id: int) -> None:
        """Makes ``broker_id`` the coordinator of ``transactional_id`` (see
        ``move_group_coordinator``)."""
        svc = self.state.services.get("transactions")
        move = getattr(svc, "move_coordinator", None)
        if move is None:
            raise IllegalStateError("the transaction coordinator is not available in this cluster")
        move(transactional_id, broker_id)

    # -- inspection ------------------------------------------------------------------
    def observe(self, fn: Observer) -> None:
        """Calls ``fn(ObservedRequest)`` with every decoded request, before it is served."""
        self.faults.add_observer(fn)

    def unobserve(self, fn: Observer) -> None:
        self.faults.remove_observer(fn)

    def record_requests(self, *api_keys: ApiKey) -> RequestRecorder:
        """Starts recording decoded requests (of the given APIs, or all); use the returned
        recorder's ``requests``, and ``close()`` it (or use it as a context manager)."""
        keys = frozenset(k for k in (_key(a) for a in api_keys) if k is not None) if api_keys else None
        rec = RequestRecorder(keys, _faults=self.faults)
        self.faults.add_observer(rec)
        return rec
