"""Fetching: the fetcher and its sessions, the buffer of fetched data, decoding, and offset
lookups (ListOffsets, OffsetForLeaderEpoch)."""
