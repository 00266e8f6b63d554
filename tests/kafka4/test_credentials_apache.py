"""SCRAM users, client quotas and delegation tokens against Apache Kafka 4.4 with a
SASL_PLAINTEXT listener (one module-scoped node; ``delegation.token.secret.key`` set so
tokens are enabled), cross-checked with Kafka's own ``kafka-configs``
(``org.apache.kafka.tools.ConfigCommand``) and ``kafka-delegation-tokens``
(``org.apache.kafka.tools.DelegationTokenCommand``), and with confluent-kafka logging in.

Kafka applies SCRAM changes through its controller, and a broker authenticates against
its metadata image a moment later: the tests wait for the login to succeed (or fail),
with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from _support.kafka_tools import run_tool, tools_classpath
from _support.settle import settled

from aiokafka_lite.admin import (
    Admin,
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilter,
    ClientQuotaFilterComponent,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from aiokafka_lite.core.errors import AuthenticationError, DelegationTokenRequestNotAllowedError
from aiokafka_lite.testing.apache import ApacheCluster

ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
SASL = {"security_protocol": "SASL_PLAINTEXT"}
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
TOKENS = "org.apache.kafka.tools.DelegationTokenCommand"
Op = ClientQuotaAlteration.Op


@pytest.fixture(scope="module")
def cluster(pytestconfig: pytest.Config) -> Iterator[ApacheCluster]:
    version = pytestconfig.getoption("--kafka-version", None)
    with ApacheCluster(
        1,
        version=str(version) if version else None,
        sasl_users={ADMIN: ADMIN_PASSWORD},
        sasl_mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512"),
        configs={"delegation.token.secret.key": "a-test-only-token-secret"},
    ) as c:
        yield c


@pytest.fixture(scope="module")
def tools(cluster: ApacheCluster) -> str:
    return tools_classpath(cluster.version)


@pytest.fixture(scope="module")
def command_config(cluster: ApacheCluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Client properties of Kafka's tools for the SASL listener, as the admin user."""
    path = tmp_path_factory.mktemp("tools") / "admin.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{ADMIN}" password="{ADMIN_PASSWORD}";\n'
    )
    return path


def _admin(
    cluster: ApacheCluster, user: str = ADMIN, password: str = ADMIN_PASSWORD, **options: object
) -> Admin:
    return Admin(
        cluster.bootstrap,
        sasl_mechanism=str(options.pop("sasl_mechanism", "SCRAM-SHA-256")),
        sasl_plain_username=user,
        sasl_plain_password=password,
        **SASL,
        **options,
    )


async def _login(cluster: ApacheCluster, user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> str:
    """ "ok" if ``user`` logs in (and a request succeeds), else the error's class name."""
    try:
        async with _admin(cluster, user, password, sasl_mechanism=mechanism, default_timeout_ms=10_000) as a:
            await a.describe_cluster()
        return "ok"
    except AuthenticationError as exc:
        return type(exc).__name__


def _confluent_login(cluster: ApacheCluster, user: str, password: str) -> bool:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    confluent_admin = pytest.importorskip("confluent_kafka.admin")
    admin = confluent_admin.AdminClient(
        {
            "bootstrap.servers": cluster.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user,
            "sasl.password": password,
        }
    )
    try:
        admin.list_topics(timeout=10)
        return True
    except confluent_kafka.KafkaException:
        return False


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def test_a_user_our_admin_creates_logs_in_and_once_deleted_cannot(cluster: ApacheCluster) -> None:
    user, password = _name("alice"), "alice-secret"
    async with _admin(cluster) as admin:
        upsert = UserScramCredentialUpsertion(
            user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), password
        )
        (await admin.alter_user_scram_credentials([upsert])).raise_errors()
        # Kafka authenticates against the broker's metadata image: wait until it has the user.
        assert await settled(lambda: _login(cluster, user, password), lambda r: r == "ok", 30) == "ok"
        assert await _login(cluster, user, "wrong") == "SaslAuthenticationFailedError"
        assert _confluent_login(cluster, user, password)

        delete = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)
        (await admin.alter_user_scram_credentials([delete])).raise_errors()
        gone = await settled(lambda: _login(cluster, user, password), lambda r: r != "ok", 30)
        assert gone == "SaslAuthenticationFailedError"


async def test_kafka_configs_reads_our_scram_users_and_quotas_and_we_read_its(
    cluster: ApacheCluster, tools: str, command_config: Path
) -> None:
    ours, theirs = _name("ours"), _name("theirs")
    boot = ["--bootstrap-server", cluster.bootstrap, "--command-config", str(command_config)]
    async with _admin(cluster) as admin:
        upsert = UserScramCredentialUpsertion(
            ours, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), "ours-secret"
        )
        (await admin.alter_user_scram_credentials([upsert])).raise_errors()
        entity = ClientQuotaEntity({"user": ours})
        quota = ClientQuotaAlteration(
            entity, [Op("producer_byte_rate", 1024), Op("request_percentage", 12.5)]
        )
        (await admin.alter_client_quotas([quota])).raise_errors()

        def described() -> str:
            return run_tool(
                tools, CONFIGS, *boot, "--describe", "--entity-type", "users", "--entity-name", ours
            )

        out = described()
        if "SCRAM-SHA-512=iterations=8192" not in out or "producer_byte_rate=1024" not in out:
            out = await settled(
                _to_async(described), lambda o: "SCRAM-SHA-512=iterations=8192" in o and "1024" in o, 30
            )
        assert "SCRAM-SHA-512=iterations=8192" in out, out
        assert re.search(r"producer_byte_rate=1024(\.0)?\b", out), out
        assert "request_percentage=12.5" in out, out

        # And the other way: what kafka-configs sets, our admin describes (and logs in with).
        run_tool(
            tools,
            CONFIGS,
            *boot,
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            theirs,
            "--add-config",
            "SCRAM-SHA-256=[iterations=4096,password=theirs-secret]",
        )
        # (kafka-configs refuses to alter SCRAM credentials and quotas in one call.)
        run_tool(
            tools,
            CONFIGS,
            *boot,
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            theirs,
            "--add-config",
            "consumer_byte_rate=2048",
        )
        got = await settled(
            lambda: admin.describe_user_scram_credentials([theirs]), lambda d: d[theirs].error is None, 30
        )
        assert got[theirs].credential_infos == (ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),)
        flt = ClientQuotaFilter.contains_only([ClientQuotaFilterComponent.of_entity("user", theirs)])
        want = {ClientQuotaEntity({"user": theirs}): {"consumer_byte_rate": 2048.0}}
        assert await settled(lambda: admin.describe_client_quotas(flt), lambda a: a == want, 30) == want
        assert (
            await settled(lambda: _login(cluster, theirs, "theirs-secret"), lambda r: r == "ok", 30) == "ok"
        )


def _to_async(fn: Callable[[], str]) -> Callable[[], Awaitable[str]]:
    async def call() -> str:
        return fn()

    return call


async def test_delegation_tokens_match_kafka_delegation_tokens(
    cluster: ApacheCluster, tools: str, command_config: Path
) -> None:
    boot = ["--bootstrap-server", cluster.bootstrap, "--command-config", str(command_config)]
    async with _admin(cluster) as admin:
        token = await admin.create_delegation_token(renewers=["User:renewer"])
        info = token.token_info
        assert info.owner == f"User:{ADMIN}" and info.renewers == ("User:renewer",)
        assert info.issue_timestamp <= info.expiry_timestamp <= info.max_timestamp
        assert len(token.hmac) == 64  # HMAC-SHA512

        # The broker's token cache follows the controller a moment later. (The tool's
        # --describe without --owner-principal lists nothing on Kafka 4.4: name the owner.)
        out = await settled(
            _to_async(
                lambda: run_tool(tools, TOKENS, *boot, "--describe", "--owner-principal", f"User:{ADMIN}")
            ),
            lambda o: info.token_id in o,
            30,
        )
        assert info.token_id in out, out
        assert token.hmac_as_base64 in out, out

        # A token made by the tool is described by us.
        created = run_tool(tools, TOKENS, *boot, "--create", "--max-life-time-period", "-1")
        listed = await settled(admin.describe_delegation_token, lambda ts: len(ts) >= 2, 30)
        tokens = {t.token_id: t for t in listed}
        assert info.token_id in tokens
        assert any(tid in created for tid in tokens if tid != info.token_id), created

        # Logging in with our token (SCRAM, tokenauth=true) once the broker has it; such a
        # connection may not ask for tokens.
        login = {"sasl_scram_token_auth": True, "default_timeout_ms": 10_000}

        async def token_login() -> str:
            try:
                async with _admin(cluster, info.token_id, token.hmac_as_base64, **login) as via_token:
                    await via_token.describe_cluster()
                    try:
                        await via_token.create_delegation_token()
                    except DelegationTokenRequestNotAllowedError:
                        return "ok, no tokens"
                    return "ok, but a token was issued"
            except AuthenticationError as exc:
                return type(exc).__name__

        assert await settled(token_login, lambda r: r.startswith("ok"), 30) == "ok, no tokens"

        # Renew and expire through us (a negative period expires and removes it at once).
        renewed = await admin.renew_delegation_token(token.hmac, 60_000)
        assert renewed <= info.max_timestamp
        expired_at = await admin.expire_delegation_token(token.hmac, -1)
        assert expired_at >= info.issue_timestamp
        after = await settled(
            admin.describe_delegation_token, lambda ts: all(t.token_id != info.token_id for t in ts), 30
        )
        assert info.token_id not in {t.token_id for t in after}
        assert (
            await settled(token_login, lambda r: not r.startswith("ok"), 30)
            == "SaslAuthenticationFailedError"
        )
