"""Print every differential case's observation on several brokers side by side.

    .venv/bin/python tests/differential/report.py [--area produce] [--case NAME] \
        apache44=127.0.0.1:39092 apache40=127.0.0.1:39192 embedded

``embedded`` starts an embedded broker for the run. Differences are marked with ``!=``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import _cases  # noqa: F401  (registers the cases)
import _cases_consumer_groups  # noqa: F401
import _cases_other  # noqa: F401
import _cases_share_admin  # noqa: F401
import _cases_txn_v2  # noqa: F401
from _diffkit import CASES, Target, kafka_generation

from aiokafka_lite.broker import EmbeddedCluster


def comparable(obs: Any) -> Any:
    """The observation without its ``_``-prefixed, informational entries (messages)."""
    if isinstance(obs, dict):
        return {k: comparable(v) for k, v in obs.items() if not k.startswith("_")}
    if isinstance(obs, list | tuple):
        return [comparable(v) for v in obs]
    return obs


def _short(obs: Any) -> str:
    return json.dumps(obs, default=lambda b: b.decode("latin-1") if isinstance(b, bytes) else repr(b))


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--area", action="append")
    ap.add_argument("--case", action="append")
    ap.add_argument("targets", nargs="+")
    args = ap.parse_args()
    embedded: EmbeddedCluster | None = None
    targets: list[Target] = []
    for spec in args.targets:
        if spec == "embedded":
            embedded = EmbeddedCluster(brokers=1)
            await embedded.start()
            targets.append(Target("embedded", embedded.bootstrap))
        else:
            name, _, bootstrap = spec.partition("=")
            targets.append(Target(name, bootstrap, await kafka_generation(bootstrap)))
    try:
        for area, cases in CASES.items():
            if args.area and area not in args.area:
                continue
            for name, fn in cases.items():
                if args.case and name not in args.case:
                    continue
                results = []
                for t in targets:
                    try:
                        results.append(await asyncio.wait_for(fn(t), 60))
                    except Exception as e:
                        results.append({"EXCEPTION": f"{type(e).__name__}: {e}"})
                    finally:
                        await t.close()
                same = all(comparable(r) == comparable(results[0]) for r in results)
                print(f"{area}/{name}: {'same' if same else '!= DIFFERENT'}")
                for t, r in zip(targets, results, strict=True):
                    print(f"    {t.name:10} {_short(r)}")
    finally:
        if embedded is not None:
            await embedded.close()


if __name__ == "__main__":
    asyncio.run(main())
