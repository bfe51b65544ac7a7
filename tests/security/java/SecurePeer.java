// The Java client over TLS and SASL for tests/security: `SecurePeer <client.properties> <topic> <count>`
// produces <count> records to partition 0 of <topic> with the given client properties (bootstrap servers,
// security.protocol, ssl.*, sasl.*), reads them back from offset 0 with an assigned consumer, and prints
// each value read, one a line. `SecurePeer refused <client.properties>` asks for the cluster id and prints
// the exception's class and message (the client's normal error), exiting 3 if it was let in.
import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class SecurePeer {
    static Properties load(String path) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(path)) {
            props.load(in);
        }
        return props;
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("refused")) {
            Properties props = load(args[1]);
            props.put("request.timeout.ms", "10000");
            props.put("default.api.timeout.ms", "15000");
            try (Admin admin = Admin.create(props)) {
                admin.describeCluster().clusterId().get(20, TimeUnit.SECONDS);
                System.out.println("let in");
                System.exit(3);
            } catch (ExecutionException e) {
                System.out.println(e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
            }
            return;
        }
        Properties props = load(args[0]);
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        Properties p = new Properties();
        p.putAll(props);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("enable.idempotence", "false");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, ("java-" + i).getBytes(StandardCharsets.UTF_8)))
                        .get(30, TimeUnit.SECONDS);
            }
        }
        Properties c = new Properties();
        c.putAll(props);
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        c.put("enable.auto.commit", "false");
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(Collections.singletonList(tp));
            consumer.seek(tp, 0);
            long deadline = System.currentTimeMillis() + 30000;
            while (got.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    got.add(new String(r.value(), StandardCharsets.UTF_8));
                }
            }
        }
        for (String v : got) System.out.println(v);
    }
}
