from aiokafka_lite.compat.aiokafka.producer.producer import AIOKafkaProducer

__all__ = ["AIOKafkaProducer"]
