"""What the admin test modules share."""

from __future__ import annotations

from aiokafka_lite.admin import Admin
from aiokafka_lite.core.errors import UnsupportedVersionError
from aiokafka_lite.wire.messages import ShareGroupDescribeRequest


async def has_share_groups(admin: Admin) -> bool:
    """Whether the broker has share groups (Kafka 4.0 has none)."""
    try:
        await admin.client.negotiated_version(None, ShareGroupDescribeRequest.API_KEY)
    except UnsupportedVersionError:
        return False
    return True
