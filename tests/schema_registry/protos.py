"""Protobuf message classes for the tests, built from descriptors (no protoc needed).

``common.proto`` (package shop.common) defines Money; ``order.proto`` (package shop) imports it and
defines Order (with a nested Line) and Customer, so the Order file has a schema reference.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass

F = descriptor_pb2.FieldDescriptorProto


def _field(
    message: descriptor_pb2.DescriptorProto,
    name: str,
    number: int,
    kind: int,
    *,
    type_name: str = "",
    repeated: bool = False,
) -> None:
    field = message.field.add(name=name, number=number, type=kind)
    field.label = F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL
    if type_name:
        field.type_name = type_name


def common_file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(
        name="shop/common.proto", package="shop.common", syntax="proto3"
    )
    money = file.message_type.add(name="Money")
    _field(money, "currency", 1, F.TYPE_STRING)
    _field(money, "units", 2, F.TYPE_INT64)
    return file


def order_file(*, extra_field: bool = False) -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3")
    file.dependency.append("shop/common.proto")
    customer = file.message_type.add(name="Customer")
    _field(customer, "name", 1, F.TYPE_STRING)
    order = file.message_type.add(name="Order")
    _field(order, "id", 1, F.TYPE_STRING)
    _field(order, "quantity", 2, F.TYPE_SINT32)
    _field(order, "total", 3, F.TYPE_MESSAGE, type_name=".shop.common.Money")
    line = order.nested_type.add(name="Line")
    _field(line, "sku", 1, F.TYPE_STRING)
    _field(line, "count", 2, F.TYPE_INT32)
    _field(order, "lines", 4, F.TYPE_MESSAGE, type_name=".shop.Order.Line", repeated=True)
    _field(order, "tags", 5, F.TYPE_STRING, repeated=True)
    if extra_field:
        _field(order, "note", 6, F.TYPE_STRING)
    return file


_pool = descriptor_pool.DescriptorPool()
_pool.Add(common_file())
_pool.Add(order_file())

Money = GetMessageClass(_pool.FindMessageTypeByName("shop.common.Money"))
Order = GetMessageClass(_pool.FindMessageTypeByName("shop.Order"))
OrderLine = GetMessageClass(_pool.FindMessageTypeByName("shop.Order.Line"))
Customer = GetMessageClass(_pool.FindMessageTypeByName("shop.Customer"))


def sample_order(i: int) -> object:
    order = Order(id=f"o-{i}", quantity=-i, tags=["a", str(i)])
    order.total.currency = "EUR"
    order.total.units = 10**12 + i
    order.lines.add(sku=f"sku-{i}", count=i)
    return order
