// The Java client (kafka-clients 3.9.1) against kafkawire's group coordinator:
// a KafkaConsumer with the classic protocol subscribes, consumes and commits; the AdminClient lists and
// describes the group and its offsets while the consumer is a member and after it left, then deletes
// committed offsets and the group. Prints "key=value" lines for the test to check.
//
// args: bootstrap topic group expectedRecords [classic|consumer]
import java.time.Duration;
import java.util.*;
import java.util.stream.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.serialization.StringDeserializer;

public class GroupsTool {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        int expected = Integer.parseInt(args[3]);
        String protocol = args.length > 4 ? args[4] : "classic";
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (protocol.equals("classic")) {
            cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
            cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        }
        cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            Set<Integer> seen = new TreeSet<>();
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
                consumer.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 60000;
                while (seen.size() < expected && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                        seen.add(Integer.parseInt(r.value()));
                    }
                    consumer.commitSync();
                }
                System.out.println("consumed=" + seen.size());
                System.out.println("assignment=" + consumer.assignment().stream().map(TopicPartition::partition)
                        .sorted().map(String::valueOf).collect(Collectors.joining(",")));
                Map<TopicPartition, OffsetAndMetadata> mine = consumer.committed(consumer.assignment());
                System.out.println("committedByConsumer=" + mine.values().stream().mapToLong(OffsetAndMetadata::offset).sum());
                // the admin view while the consumer is a member
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
                System.out.println("stableState=" + d.state());
                System.out.println("stableMembers=" + d.members().size());
                System.out.println("stableAssignor=" + d.partitionAssignor());
                System.out.println("stableMemberPartitions=" + d.members().stream()
                        .mapToInt(m -> m.assignment().topicPartitions().size()).sum());
                System.out.println("coordinator=" + d.coordinator().id());
            }
            Collection<ConsumerGroupListing> listed = admin.listConsumerGroups().all().get();
            System.out.println("listed=" + listed.stream().anyMatch(l -> l.groupId().equals(group)));
            Map<TopicPartition, OffsetAndMetadata> offsets =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            System.out.println("offsetSum=" + offsets.values().stream().mapToLong(OffsetAndMetadata::offset).sum());
            System.out.println("offsetPartitions=" + offsets.size());
            ConsumerGroupDescription after = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
            System.out.println("emptyState=" + after.state());
            // delete one partition's offset, then the group
            admin.deleteConsumerGroupOffsets(group, Set.of(new TopicPartition(topic, 0))).all().get();
            System.out.println("offsetPartitionsAfterDelete=" +
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().size());
            admin.deleteConsumerGroups(List.of(group)).all().get();
            System.out.println("listedAfterDelete=" + admin.listConsumerGroups().all().get().stream()
                    .anyMatch(l -> l.groupId().equals(group)));
            try {
                admin.deleteConsumerGroups(List.of("no-such-group-" + group)).all().get();
                System.out.println("deleteUnknown=ok");
            } catch (Exception e) {
                System.out.println("deleteUnknown=" + e.getCause().getClass().getSimpleName());
            }
        }
    }
}
