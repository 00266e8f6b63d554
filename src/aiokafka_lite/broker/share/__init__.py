"""The embedded broker's share groups (KIP-932): the group coordinator, the share-partition
state and its store, and the admin requests over them."""
