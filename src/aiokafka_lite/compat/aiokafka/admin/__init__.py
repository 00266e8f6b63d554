from aiokafka_lite.compat.aiokafka.admin.client import AIOKafkaAdminClient
from aiokafka_lite.compat.aiokafka.admin.new_topic import NewTopic

__all__ = ["AIOKafkaAdminClient", "NewTopic"]
