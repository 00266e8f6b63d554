"""examples/transactions.py: consume-transform-produce exactly once, with one aborted attempt."""

from __future__ import annotations

import re

from examples_testlib import run_example

from aiokafka_lite.admin import Admin


def test_transactions_example() -> None:
    proc = run_example("transactions")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "aborted a transaction: the invoicer fell over before committing" in out
    assert "invoiced 120 orders in transactions" in out
    assert "read_committed consumers see 120 invoices, one per order: True" in out
    seen = re.search(r"read_uncommitted consumers also see the aborted attempt: (\d+) invoices", out)
    assert seen and int(seen.group(1)) > 120, out  # the aborted invoices are in the log, hidden
    assert re.search(r"the group's committed offsets reach the end of orders-\w+: True", out), out


async def test_transactions_example_against_a_given_cluster(kafka_bootstrap: str) -> None:
    proc = run_example("transactions", "--bootstrap", kafka_bootstrap)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "one per order: True" in proc.stdout
    async with Admin(kafka_bootstrap) as admin:
        left = [t for t in await admin.list_topics() if t.startswith(("orders-", "invoices-"))]
    assert not left  # cleaned up
