"""The wire contract: message models, properties and record codecs, msgIds.

Imported by every layer (client, broker, nameserver); it does no IO.
"""

from connector.protocol.batch import DecodedBatch, decode_batch, encode_batch
from connector.protocol.hashing import key_hash, tags_code
from connector.protocol.message import Message, MessageExt, MessageQueue, SysFlag
from connector.protocol.msgid import (
    UniqKeyGenerator,
    decode_offset_msg_id,
    encode_host,
    encode_offset_msg_id,
)
from connector.protocol.names import validate_group, validate_topic
from connector.protocol.properties import PropertyKeys, decode_properties, encode_properties
from connector.protocol.record import decode_record, encode_record
from connector.protocol.route import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    KvEntry,
    KvValue,
    LiveBroker,
    QueueData,
    RegisterBrokerRequest,
    RegisterBrokerResult,
    TopicList,
    TopicQueueConfig,
    TopicRouteData,
    UnregisterBrokerRequest,
)

__all__ = [
    "BrokerData",
    "ClusterInfo",
    "DataVersion",
    "DecodedBatch",
    "KvEntry",
    "KvValue",
    "LiveBroker",
    "Message",
    "MessageExt",
    "MessageQueue",
    "PropertyKeys",
    "QueueData",
    "RegisterBrokerRequest",
    "RegisterBrokerResult",
    "SysFlag",
    "TopicList",
    "TopicQueueConfig",
    "TopicRouteData",
    "UniqKeyGenerator",
    "UnregisterBrokerRequest",
    "decode_batch",
    "decode_offset_msg_id",
    "decode_properties",
    "decode_record",
    "encode_batch",
    "encode_host",
    "encode_offset_msg_id",
    "encode_properties",
    "encode_record",
    "key_hash",
    "tags_code",
    "validate_group",
    "validate_topic",
]
