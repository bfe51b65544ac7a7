// The Apache Kafka Java client (kafka-clients 3.9.x) against a broker, for tests/peers/test_java_client.py.
//
// Usage: KafkawirePeer <bootstrap> <topic> <partitions> <compression> <timestamp-query>
//        KafkawirePeer consume <bootstrap> <topic> <partitions> <count>   (only the "record" lines)
// stdin: one record per line, tab-separated: partition, key, value, timestamp, headers
//        (key/value as hex or "-" for null; headers as name=value pairs joined by ",", each side hex,
//        value "-" for null; "" for no headers).
// stdout: tab-separated result lines, first word says what:
//   created | exists <exception class> | cluster <id> <node> <host> <port> <controller>
//   partition <p> <leader> <replicas> <isr> | config <name> <value> <source>
//   scratch-listed-after-delete <true|false> | delivered <i> <partition> <offset> <timestamp>
//   offsets <p> <earliest> <latest> <offset-for-timestamp> <its-timestamp>
//   record <partition> <offset> <timestamp> <timestamp-type> <key> <value> <headers>
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KafkawirePeer {
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    static String hex(byte[] b) {
        if (b == null) return "-";
        char[] out = new char[b.length * 2];
        for (int i = 0; i < b.length; i++) {
            out[2 * i] = HEX[(b[i] >> 4) & 0xf];
            out[2 * i + 1] = HEX[b[i] & 0xf];
        }
        return new String(out);
    }

    static byte[] unhex(String s) {
        if (s.equals("-")) return null;
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    static String ids(List<Node> nodes) {
        return nodes.stream().map(n -> Integer.toString(n.id())).collect(Collectors.joining(","));
    }

    static void emit(Object... fields) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < fields.length; i++) {
            if (i > 0) sb.append('\t');
            sb.append(fields[i]);
        }
        System.out.println(sb);
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("consume")) {  // consume <bootstrap> <topic> <partitions> <count>
            Properties common = new Properties();
            common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
            consumeAll(common, args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
            return;
        }
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        String compression = args[3];
        long timestampQuery = Long.parseLong(args[4]);

        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) continue;
                String[] f = line.split("\t", -1);
                List<Header> headers = new ArrayList<>();
                if (!f[4].isEmpty()) {
                    for (String pair : f[4].split(",")) {
                        String[] kv = pair.split("=", 2);
                        headers.add(new RecordHeader(new String(unhex(kv[0]), StandardCharsets.UTF_8), unhex(kv[1])));
                    }
                }
                records.add(new ProducerRecord<>(topic, Integer.parseInt(f[0]), Long.parseLong(f[3]), unhex(f[1]),
                                                 unhex(f[2]), headers));
            }
        }

        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        common.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        common.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);

        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1)
                    .configs(Map.of("retention.ms", "5400000")))).all().get();
            emit("created");
            try {
                admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
                emit("exists", "none");
            } catch (ExecutionException e) {
                emit("exists", e.getCause().getClass().getSimpleName());
            }
            DescribeClusterResult cluster = admin.describeCluster();
            Node node = cluster.nodes().get().iterator().next();
            emit("cluster", cluster.clusterId().get(), cluster.nodes().get().size() == 1 ? node.id() : -1,
                 node.host(), node.port(), cluster.controller().get().id());
            TopicDescription desc = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            for (TopicPartitionInfo p : desc.partitions()) {
                emit("partition", p.partition(), p.leader().id(), ids(p.replicas()), ids(p.isr()));
            }
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
            for (String name : List.of("retention.ms", "cleanup.policy")) {
                ConfigEntry entry = config.get(name);
                emit("config", name, entry == null ? "-" : entry.value(), entry == null ? "-" : entry.source().name());
            }
            String scratch = topic + "-scratch";
            admin.createTopics(List.of(new NewTopic(scratch, 1, (short) 1))).all().get();
            admin.deleteTopics(List.of(scratch)).all().get();
            emit("scratch-listed-after-delete", admin.listTopics().names().get().contains(scratch));
        }

        Properties pp = new Properties();
        pp.putAll(common);
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 60000);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (ProducerRecord<byte[], byte[]> r : records) futures.add(producer.send(r));
            producer.flush();
            for (int i = 0; i < futures.size(); i++) {
                RecordMetadata m = futures.get(i).get();
                emit("delivered", i, m.partition(), m.offset(), m.timestamp());
            }
        }

        try (Admin admin = Admin.create(common)) {
            Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            Map<TopicPartition, OffsetSpec> byTime = new HashMap<>();
            for (int p = 0; p < partitions; p++) {
                TopicPartition tp = new TopicPartition(topic, p);
                earliest.put(tp, OffsetSpec.earliest());
                latest.put(tp, OffsetSpec.latest());
                byTime.put(tp, OffsetSpec.forTimestamp(timestampQuery));
            }
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e = admin.listOffsets(earliest).all().get();
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> l = admin.listOffsets(latest).all().get();
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> t = admin.listOffsets(byTime).all().get();
            for (int p = 0; p < partitions; p++) {
                TopicPartition tp = new TopicPartition(topic, p);
                emit("offsets", p, e.get(tp).offset(), l.get(tp).offset(), t.get(tp).offset(), t.get(tp).timestamp());
            }
        }

        consumeAll(common, topic, partitions, records.size());
    }

    // Reads every partition from the beginning with assign, printing "record" lines; stops a little after `count`.
    static void consumeAll(Properties common, String topic, int partitions, int count) {
        Properties cp = new Properties();
        cp.putAll(common);
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        cp.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 100);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            int seen = 0;
            int extraPolls = 2;  // after the expected count, poll a little more: surplus records are a failure too
            long deadline = System.currentTimeMillis() + 60000;
            while (System.currentTimeMillis() < deadline && extraPolls > 0) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    StringBuilder hs = new StringBuilder();
                    for (Header h : r.headers()) {
                        if (hs.length() > 0) hs.append(',');
                        hs.append(hex(h.key().getBytes(StandardCharsets.UTF_8))).append('=').append(hex(h.value()));
                    }
                    emit("record", r.partition(), r.offset(), r.timestamp(), r.timestampType().name,
                         hex(r.key()), hex(r.value()), hs);
                    seen++;
                }
                if (seen >= count) extraPolls--;
            }
        }
    }
}
