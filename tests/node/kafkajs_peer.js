// Drives KafkaJS against a broker for tests/peers/test_kafkajs.py.
//
// Reads one JSON job from stdin and writes one JSON result to stdout (logs go to stderr).
// Produce job (default):
//   {brokers: ["host:port"], topic, partitions, compression: "none"|"gzip", idempotent: bool,
//    records: [{partition, key, value, headers: [[name, value]], timestamp}]}
//   -> what the admin saw (create, metadata, cluster, offsets) and where each record landed.
// Consume job: {mode: "consume", brokers, topic, groupId, count, timeoutMs}
//   -> {consumed: [{partition, offset, key, value, headers: [[name, value]], timestamp}]}, read by a
//      group member subscribed from the beginning, stopping once `count` records arrived.
// Keys, values and header values are base64 strings or null.
'use strict';

const { Kafka, logLevel, CompressionTypes } = require('kafkajs');

function readStdin() {
  return new Promise((resolve, reject) => {
    const chunks = [];
    process.stdin.on('data', (c) => chunks.push(c));
    process.stdin.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    process.stdin.on('error', reject);
  });
}

const fromB64 = (s) => (s === null ? null : Buffer.from(s, 'base64'));

function stderrLogger() {
  return ({ namespace, level, log }) => {
    const { message, ...extra } = log;
    process.stderr.write(`[kafkajs ${namespace} ${level}] ${message} ${JSON.stringify(extra)}\n`);
  };
}

const toB64 = (b) => (b === null || b === undefined ? null : Buffer.from(b).toString('base64'));

async function consume(kafka, job) {
  const consumer = kafka.consumer({ groupId: job.groupId, maxWaitTimeInMs: 100, sessionTimeout: 10000,
                                    heartbeatInterval: 1000, allowAutoTopicCreation: false });
  const consumed = [];
  let finish;
  const done = new Promise((resolve) => { finish = resolve; });
  const timer = setTimeout(() => finish('timeout'), job.timeoutMs);
  await consumer.connect();
  try {
    await consumer.subscribe({ topic: job.topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        const headers = [];
        for (const [name, value] of Object.entries(message.headers || {})) {
          for (const v of Array.isArray(value) ? value : [value]) headers.push([name, toB64(v)]);
        }
        consumed.push({ partition, offset: Number(message.offset), key: toB64(message.key),
                        value: toB64(message.value), headers, timestamp: Number(message.timestamp) });
        if (consumed.length >= job.count) finish('count');
      },
    });
    const why = await done;
    // A little longer: records beyond the expected count are a failure too.
    if (why === 'count') await new Promise((r) => setTimeout(r, 500));
  } finally {
    clearTimeout(timer);
    await consumer.disconnect();
  }
  return { consumed };
}

async function main() {
  const job = JSON.parse(await readStdin());
  const kafka = new Kafka({
    clientId: 'kafkawire-peers-kafkajs',
    brokers: job.brokers,
    logLevel: logLevel.WARN,
    logCreator: stderrLogger,
    retry: { retries: 3, initialRetryTime: 100 },
    connectionTimeout: 5000,
    requestTimeout: 15000,
  });
  if (job.mode === 'consume') {
    process.stdout.write(JSON.stringify(await consume(kafka, job)) + '\n');
    return;
  }
  const result = {};

  const admin = kafka.admin();
  await admin.connect();
  try {
    result.created = await admin.createTopics({
      topics: [{ topic: job.topic, numPartitions: job.partitions, replicationFactor: 1 }],
      waitForLeaders: true,
      timeout: 10000,
    });
    // Creating the same topic again reports false (already there) rather than failing.
    result.createdAgain = await admin.createTopics({
      topics: [{ topic: job.topic, numPartitions: job.partitions, replicationFactor: 1 }],
      timeout: 10000,
    });
    const md = await admin.fetchTopicMetadata({ topics: [job.topic] });
    result.metadata = md.topics.map((t) => ({
      name: t.name,
      partitions: t.partitions
        .map((p) => ({ partition: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr,
                       error: p.partitionErrorCode }))
        .sort((a, b) => a.partition - b.partition),
    }));
    const cluster = await admin.describeCluster();
    result.cluster = { brokers: cluster.brokers.map((b) => ({ nodeId: b.nodeId, host: b.host, port: b.port })),
                       controller: cluster.controller, clusterId: cluster.clusterId };
    result.topicsBefore = (await admin.listTopics()).filter((t) => t === job.topic);
  } finally {
    await admin.disconnect();
  }

  const producer = kafka.producer({
    idempotent: job.idempotent,
    maxInFlightRequests: job.idempotent ? 1 : undefined,
    allowAutoTopicCreation: false,
  });
  await producer.connect();
  const compression = job.compression === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None;
  // One send per chunk: KafkaJS reports the base offset of each partition's batch, so a record's offset
  // is that base plus its position among the chunk's records for the same partition.
  const delivered = new Array(job.records.length);
  const chunk = 100;
  try {
    for (let start = 0; start < job.records.length; start += chunk) {
      const slice = job.records.slice(start, start + chunk);
      const messages = slice.map((r) => {
        const headers = {};
        const m = { partition: r.partition, key: fromB64(r.key), value: fromB64(r.value),
                    timestamp: String(r.timestamp) };
        if (r.headers.length) {
          for (const [name, value] of r.headers) {
            const v = fromB64(value);
            if (name in headers) headers[name] = [].concat(headers[name], v);
            else headers[name] = v;
          }
          m.headers = headers;
        }
        return m;
      });
      const metas = await producer.send({ topic: job.topic, messages, acks: -1, compression });
      const base = {};
      for (const meta of metas) {
        if (meta.errorCode !== 0) throw new Error(`produce error ${meta.errorCode} on partition ${meta.partition}`);
        base[meta.partition] = BigInt(meta.baseOffset);
      }
      const seen = {};
      slice.forEach((r, i) => {
        const n = seen[r.partition] || 0n;
        seen[r.partition] = n + 1n;
        delivered[start + i] = [r.partition, Number(base[r.partition] + n)];
      });
    }
  } finally {
    await producer.disconnect();
  }
  result.delivered = delivered;

  const admin2 = kafka.admin();
  await admin2.connect();
  try {
    result.offsets = (await admin2.fetchTopicOffsets(job.topic))
      .map((o) => ({ partition: o.partition, low: Number(o.low), high: Number(o.high), offset: Number(o.offset) }))
      .sort((a, b) => a.partition - b.partition);
    if (job.timestampQuery !== undefined) {
      result.byTimestamp = (await admin2.fetchTopicOffsetsByTimestamp(job.topic, job.timestampQuery))
        .map((o) => ({ partition: o.partition, offset: Number(o.offset) }))
        .sort((a, b) => a.partition - b.partition);
    }
    // A second topic, created and deleted by KafkaJS.
    const scratch = `${job.topic}-scratch`;
    await admin2.createTopics({ topics: [{ topic: scratch, numPartitions: 1 }], waitForLeaders: true });
    await admin2.deleteTopics({ topics: [scratch], timeout: 10000 });
    result.scratchAfterDelete = (await admin2.listTopics()).filter((t) => t === scratch);
  } finally {
    await admin2.disconnect();
  }

  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((err) => {
  process.stderr.write(`kafkajs_peer failed: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
