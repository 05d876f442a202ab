'use strict';
// ali-ons (a RocketMQ remoting client in pure JavaScript) against pymq, for
// tests/interop/test_ali_ons.py. One JSON line on stdout says what happened.
//   node client.js produce <namesrv> <topic> <count>
//   node client.js consume <namesrv> <topic> <group> <expected>
//   node client.js retry <namesrv> <topic> <group> <expected>  (each message asked again once)
//   node client.js half <namesrv> <topic> <count>  (transactional halves: TRAN_MSG set)
const { Producer, Consumer, Message } = require('ali-ons');
const httpclient = require('urllib');

const [mode, nameSrv, topic] = process.argv.slice(2, 5);
// ACL: the account from the environment (empty: unsigned requests)
const common = {
  httpclient, nameSrv, onsChannel: 'LOCAL',
  accessKeyId: process.env.ALI_ONS_ACCESS_KEY || '', accessKeySecret: process.env.ALI_ONS_SECRET_KEY || '',
};
const errors = [];
const done = report => {
  process.stdout.write(JSON.stringify({ ...report, errors }) + '\n');
  process.exit(0);
};
setTimeout(() => done({ timedOut: true }), 90000).unref();

async function produce(count, half) {
  const producer = new Producer({ ...common, producerGroup: half ? 'PID_ALI_ONS_TX' : 'PID_ALI_ONS' });
  producer.on('error', err => errors.push(err.message));
  await producer.ready();
  const sent = [];
  for (let i = 0; i < count; i++) {
    const msg = new Message(topic, i % 2 ? 'TagB' : 'TagA', `ali-ons-${i}-é`);
    msg.keys = [`key-${i}`];
    msg.properties.seq = String(i);
    if (half) msg.properties.TRAN_MSG = 'true'; // ali-ons then sends it prepared (a half)
    const r = await producer.send(msg);
    const mq = r.messageQueue;
    sent.push({
      i, status: r.sendStatus, broker: mq.brokerName, queue: mq.queueId, offset: r.queueOffset,
      msgId: r.msgId,
    });
  }
  await producer.close();
  done({ sent });
}

function consume(group, expected, retryOnce) {
  const consumer = new Consumer({ ...common, consumerGroup: group, persistConsumerOffsetInterval: 200 });
  consumer.on('error', err => errors.push(err.message));
  const got = new Map();
  const refused = new Set();
  let closing = false;
  consumer.subscribe(topic, '*', async msg => {
    const body = msg.body.toString();
    if (retryOnce && !refused.has(body)) {
      refused.add(body);
      return Consumer.ACTION_RETRY; // sent back to the broker: %RETRY%group, later
    }
    got.set(body, {
      body, tags: msg.tags, keys: msg.keys, properties: msg.properties,
      topic: msg.topic, reconsumeTimes: msg.reconsumeTimes,
    });
    if (got.size >= expected && !closing) {
      closing = true;
      // let this last message be acknowledged, then persist the offsets and leave
      setTimeout(async () => {
        await consumer.close();
        done({ messages: [...got.values()] });
      }, 1000);
    }
  });
}

(async () => {
  if (mode === 'produce') await produce(Number(process.argv[5]), false);
  else if (mode === 'half') await produce(Number(process.argv[5]), true);
  else if (mode === 'consume') consume(process.argv[5], Number(process.argv[6]), false);
  else if (mode === 'retry') consume(process.argv[5], Number(process.argv[6]), true);
  else throw new Error(`unknown mode ${mode}`);
})().catch(err => {
  errors.push(String(err && err.stack || err));
  done({ failed: true });
});
