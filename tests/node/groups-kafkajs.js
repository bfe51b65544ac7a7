// KafkaJS consumer group against kafkawire: two members share a topic (subscribe, run, commit),
// then the admin client lists, describes and fetches the group's offsets.
// Input (stdin, JSON): {brokers, topic, group, partitions, expected}. Output (stdout, JSON): what happened.
const { Kafka, logLevel } = require("kafkajs");

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return JSON.parse(Buffer.concat(chunks).toString());
}

function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }

async function until(pred, ms, what) {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error("timed out waiting for " + what);
    await sleep(100);
  }
}

async function main() {
  const job = await readStdin();
  const kafka = new Kafka({ clientId: "kafkajs-groups", brokers: job.brokers, logLevel: logLevel.NOTHING,
    retry: { retries: 10, initialRetryTime: 100 } });
  const seen = new Set();
  const assignments = {};
  const joins = [];
  const consumers = [];
  async function start(name) {
    const c = kafka.consumer({ groupId: job.group, sessionTimeout: 6000, heartbeatInterval: 500,
      rebalanceTimeout: 10000, maxWaitTimeInMs: 200 });
    c.on(c.events.GROUP_JOIN, (e) => {
      const parts = (e.payload.memberAssignment[job.topic] || []).slice().sort((a, b) => a - b);
      assignments[name] = parts;
      joins.push({ name, generation: e.payload.groupId, leader: e.payload.isLeader, parts });
    });
    await c.connect();
    await c.subscribe({ topics: [job.topic], fromBeginning: true });
    await c.run({ eachMessage: async ({ message }) => { seen.add(Number(message.value.toString())); } });
    consumers.push(c);
    return c;
  }
  const c1 = await start("c1");
  await until(() => (assignments.c1 || []).length === job.partitions, 30000, "c1 to own every partition");
  await start("c2");
  await until(() => {
    const a = assignments.c1 || [], b = assignments.c2 || [];
    return a.length + b.length === job.partitions && a.length > 0 && b.length > 0 &&
      new Set([...a, ...b]).size === job.partitions;
  }, 40000, "a rebalance across c1 and c2");
  const balanced = JSON.parse(JSON.stringify(assignments));
  await until(() => seen.size >= job.expected, 40000, "every record");
  const during = await kafka.admin();
  await during.connect();
  const describedStable = await during.describeGroups([job.group]);
  await during.disconnect();
  for (const c of consumers) await c.disconnect();
  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.fetchOffsets({ groupId: job.group, topics: [job.topic] });
  const listed = await admin.listGroups();
  const described = await admin.describeGroups([job.group]);
  await admin.disconnect();
  process.stdout.write(JSON.stringify({
    seen: [...seen].sort((a, b) => a - b), assignments: balanced, joins, offsets, listed,
    describedStable: describedStable.groups.map((g) => ({ groupId: g.groupId, state: g.state,
      protocol: g.protocol, protocolType: g.protocolType, members: g.members.length })),
    described: described.groups.map((g) => ({ groupId: g.groupId, state: g.state, members: g.members.length })),
  }));
  void c1;
}

main().then(() => process.exit(0), (e) => { console.error(e && e.stack || e); process.exit(1); });
