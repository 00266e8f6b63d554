"""Spark's own Kafka connector (the built-in ``kafka`` format), fetched from Maven Central.

The aiokafka_lite data source is compared with it record for record and benchmarked
against it. :func:`connector_jars` resolves ``org.apache.spark:spark-sql-kafka-0-10_2.13``
for the installed pyspark with Maven (``spark_kafka_connector_pom.xml`` beside this file)
and copies the jars pyspark does not ship into a cache folder; pass them to Spark as
``spark.jars``::

    python -m aiokafka_lite.integrations.spark.connector --fetch     # prints the jars, comma-separated

Cache: ``~/.cache/aiokafka_lite/integrations/spark-kafka-connector/<pyspark version>/jars`` (or
``$AIOKAFKA_LITE_SPARK_CONNECTOR_CACHE``); Maven keeps its downloads in ``~/.m2``.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

__all__ = ["CONNECTOR_FALLBACK", "ConnectorFetchError", "connector_jars", "connector_version"]

ARTIFACT = "org.apache.spark:spark-sql-kafka-0-10_2.13"

#: pyspark releases whose connector is not (yet) on Maven Central -> the release used
#: instead. pyspark 4.3.0 is on PyPI but Maven Central's newest Spark is 4.2.0 (checked
#: 2026-11-24); the 4.2.0 connector loads and runs on Spark 4.3.0 (the comparison tests
#: exercise it). Remove an entry once the matching release is published.
CONNECTOR_FALLBACK = {"4.3.0": "4.2.0"}


class ConnectorFetchError(RuntimeError):
    """Maven (or Maven Central) could not provide Spark's Kafka connector."""


def _pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def _cache_root() -> Path:
    env = os.environ.get("AIOKAFKA_LITE_SPARK_CONNECTOR_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "aiokafka_lite" / "spark-kafka-connector"


def _mvn() -> str:
    found = os.environ.get("AIOKAFKA_LITE_MVN") or shutil.which("mvn")
    if found is None:
        raise ConnectorFetchError(
            "fetching Spark's Kafka connector needs Maven, and no `mvn` is on PATH: install it "
            "(e.g. `apt-get install maven`), or point AIOKAFKA_LITE_MVN at it"
        )
    return found


def _copy(version: str, staging: Path, cwd: str) -> tuple[bool, str]:
    pom = resources.files("aiokafka_lite.integrations.spark").joinpath("spark_kafka_connector_pom.xml")
    with resources.as_file(pom) as pom_path:
        cmd = [
            _mvn(),
            "-B",
            "-q",
            "-f",
            str(pom_path),
            "dependency:copy-dependencies",
            f"-Dspark.version={version}",
            f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
            # pyspark ships these already (spark-tags in the installed version).
            "-DexcludeArtifactIds=spark-tags_2.13,scala-parallel-collections_2.13",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=900)
    jars = list(staging.glob("spark-sql-kafka-0-10_2.13-*.jar")) if staging.exists() else []
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
    return proc.returncode == 0 and bool(jars), f"command: {' '.join(cmd)}\n{tail}"


def connector_version(spark_version: str | None = None) -> str:
    """The connector release used for ``spark_version`` (default: the installed pyspark)."""
    spark_version = spark_version or _pyspark_version()
    return os.environ.get("AIOKAFKA_LITE_SPARK_CONNECTOR_VERSION") or spark_version


def connector_jars(spark_version: str | None = None) -> list[Path]:
    """The connector's jars for ``spark_version`` (default: the installed pyspark), fetched
    with Maven on first use. Safe to call from several processes at once."""
    spark_version = spark_version or _pyspark_version()
    wanted = connector_version(spark_version)
    target = _cache_root() / wanted
    jars_dir = target / "jars"
    done = target / ".complete"
    if not done.exists():
        target.mkdir(parents=True, exist_ok=True)
        with open(target / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                _fetch(wanted, target, jars_dir, done)
    return sorted(jars_dir.glob("*.jar"))


def _fetch(wanted: str, target: Path, jars_dir: Path, done: Path) -> None:
    tried: list[str] = []
    for version in dict.fromkeys([wanted, CONNECTOR_FALLBACK.get(wanted, wanted)]):
        with tempfile.TemporaryDirectory(dir=target) as tmp:
            staging = Path(tmp) / "jars"
            ok, detail = _copy(version, staging, tmp)
            if ok:
                if jars_dir.exists():
                    shutil.rmtree(jars_dir)
                staging.rename(jars_dir)
                done.write_text(version + "\n")
                return
            tried.append(f"{ARTIFACT}:{version}: {detail}")
    raise ConnectorFetchError(
        "Maven could not fetch Spark's Kafka connector; is Maven Central reachable?\n" + "\n".join(tried)
    )


def resolved_version(spark_version: str | None = None) -> str:
    """The connector release actually in the cache for ``spark_version`` (fetching it)."""
    wanted = connector_version(spark_version)
    connector_jars(spark_version)
    return (_cache_root() / wanted / ".complete").read_text().strip()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--fetch", action="store_true", help="fetch (if needed) and print the jars")
    parser.add_argument("--spark-version", default=None, help="default: the installed pyspark's")
    args = parser.parse_args(argv)
    jars = connector_jars(args.spark_version)
    print(",".join(str(j) for j in jars))


if __name__ == "__main__":
    main()
