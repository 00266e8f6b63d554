"""aiokafka_lite: an asyncio-native Apache Kafka client."""

__version__ = "0.1.0"

from aiokafka_lite.admin import Admin as Admin
from aiokafka_lite.admin import NewTopic as NewTopic
from aiokafka_lite.fetch import Consumer as Consumer
from aiokafka_lite.fetch import Record as Record
from aiokafka_lite.net import Client as Client
from aiokafka_lite.produce import Producer as Producer
from aiokafka_lite.produce import RecordMetadata as RecordMetadata
from aiokafka_lite.structs import TopicPartition as TopicPartition
