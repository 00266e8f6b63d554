from aiokafka_lite.compat.aiokafka.consumer.consumer import AIOKafkaConsumer

__all__ = ["AIOKafkaConsumer"]
