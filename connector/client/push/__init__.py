"""RocketMQ's push consumer: subscriptions, group rebalancing, a listener called
with the messages of the queues this member owns (``PushConsumer``)."""

from connector.client.push.consumer import PushConsumer
from connector.client.push.status import ConsumeOrderlyStatus, ConsumeStatus

__all__ = ["ConsumeOrderlyStatus", "ConsumeStatus", "PushConsumer"]
