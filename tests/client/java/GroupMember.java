// A Java KafkaConsumer as a member of a consumer group, beside kafkawire's client in the group tests
// (tests/client/test_groups_peers.py): the counterpart of tests/groups/workers/ck_worker.py for Java.
//
// args: bootstrap topic group protocol(classic|consumer) assignor events-file stop-file
//   assignor: classic: range, roundrobin or cooperative-sticky; consumer: the broker's assignor (uniform, range)
// Writes JSON lines: {"k":"assigned","parts":[...]} whenever its assignment changes,
// {"k":"rec","p":partition,"o":offset,"v":value} per record, {"k":"closed"} at the end.
// Commits synchronously after each batch; creating the stop file makes it close() (and leave) cleanly.
import java.io.*;
import java.nio.file.*;
import java.time.Duration;
import java.util.*;
import java.util.stream.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class GroupMember {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2], protocol = args[3], assignor = args[4];
        Path events = Paths.get(args[5]), stop = Paths.get(args[6]);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        if (protocol.equals("classic")) {
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
            String cls = Map.of("range", RangeAssignor.class, "roundrobin", RoundRobinAssignor.class,
                    "cooperative-sticky", CooperativeStickyAssignor.class).get(assignor).getName();
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, cls);
        } else {
            p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
        }
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (PrintWriter out = new PrintWriter(new FileWriter(events.toFile(), true), true);
             KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic));
            String last = null;
            long deadline = System.currentTimeMillis() + 300_000;
            while (!Files.exists(stop) && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                String parts = c.assignment().stream().map(TopicPartition::partition).sorted()
                        .map(String::valueOf).collect(Collectors.joining(","));
                if (!parts.equals(last)) {
                    last = parts;
                    out.println("{\"k\":\"assigned\",\"parts\":[" + parts + "]}");
                }
                for (ConsumerRecord<String, String> r : recs) {
                    out.println("{\"k\":\"rec\",\"p\":" + r.partition() + ",\"o\":" + r.offset() + ",\"v\":" + r.value() + "}");
                }
                if (!recs.isEmpty()) {
                    try {
                        c.commitSync();
                    } catch (Exception e) {
                        out.println("{\"k\":\"commit_error\"}");
                    }
                }
            }
            c.close();
            out.println("{\"k\":\"closed\"}");
        }
    }
}
