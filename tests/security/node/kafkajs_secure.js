// KafkaJS over TLS and SASL for tests/security/test_clients.py. One JSON job on stdin, one JSON result on stdout:
//   {brokers, ssl: null | {ca, cert?, key?} (PEM file paths), sasl: null | {mechanism, username, password},
//    topic, values: [string], mode: "roundtrip" | "refused"}
// roundtrip: produces the values to partition 0, reads them back with a group member from the beginning
//   -> {consumed: [string]}
// refused: connects an admin client -> {error: "<KafkaJS error class name>", message} (or {error: null} if let in)
'use strict';

const fs = require('fs');
const path = require('path');
const { Kafka, logLevel } = require(path.join(__dirname, '..', '..', 'node', 'node_modules', 'kafkajs'));

async function main() {
  const job = JSON.parse(fs.readFileSync(0, 'utf8'));
  const config = { clientId: 'kafkawire-security-test', brokers: job.brokers, logLevel: logLevel.NOTHING,
                   retry: { retries: 1, initialRetryTime: 100 }, connectionTimeout: 10000 };
  if (job.ssl) {
    config.ssl = { ca: [fs.readFileSync(job.ssl.ca, 'utf8')] };
    if (job.ssl.cert) {
      config.ssl.cert = fs.readFileSync(job.ssl.cert, 'utf8');
      config.ssl.key = fs.readFileSync(job.ssl.key, 'utf8');
    }
  }
  if (job.sasl) config.sasl = job.sasl;
  const kafka = new Kafka(config);
  if (job.mode === 'refused') {
    const admin = kafka.admin();
    try {
      await admin.connect();
      await admin.listTopics();
      await admin.disconnect();
      return { error: null };
    } catch (e) {
      return { error: e.name, message: e.message };
    }
  }
  const producer = kafka.producer({ allowAutoTopicCreation: true });
  await producer.connect();
  await producer.send({ topic: job.topic, messages: job.values.map((v) => ({ value: v, partition: 0 })) });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: `g-${job.topic}`, maxWaitTimeInMs: 100 });
  const consumed = [];
  await consumer.connect();
  await consumer.subscribe({ topic: job.topic, fromBeginning: true });
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, 30000);
    consumer.run({ autoCommit: false, eachMessage: async ({ message }) => {
      consumed.push(message.value.toString());
      if (consumed.length >= job.values.length) { clearTimeout(timer); resolve(); }
    } });
  });
  await consumer.disconnect();
  return { consumed };
}

main().then((r) => { process.stdout.write(JSON.stringify(r)); process.exit(0); },
            (e) => { process.stderr.write(`${e.stack}\n`); process.exit(1); });
