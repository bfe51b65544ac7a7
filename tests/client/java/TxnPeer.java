// Kafka's Java producer and consumer in transactions, for tests/peers/test_java_transactions.py; compiled
// against kafka-clients 3.9.1 (transaction version 1: AddPartitionsToTxn, AddOffsetsToTxn) and 4.4 (version 2
// when the broker finalizes it: Produce adds the partitions, EndTxn bumps the epoch).
//
// args: scenario bootstrap ...; prints result lines the test checks (values are decimal strings):
//   cycle bootstrap topic txnId: commit 0-9, abort 100-109 (sent before the abort), commit 200-209 (partition
//     v % 2); then "read_committed v v ..." and "read_uncommitted v v ..." as Java consumers read the topic.
//   ctp bootstrap source sink group txnId count: a group consumer (read_committed) reads count records of
//     source, the transactional producer writes v*10 to sink (same partition) and commits the consumer's
//     offsets with sendOffsetsToTransaction; a first round is aborted, a second committed; "offsets p=o ...".
//   zombie bootstrap topic txnId: producer A opens a transaction (1, 2 sent), producer B with the same id
//     initializes (fencing A), A's next send and commit fail: "fenced <exception class>"; B commits 10.
import java.time.Duration;
import java.util.*;
import java.util.stream.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnPeer {
    static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "60000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    static Properties consumerProps(String bootstrap, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return p;
    }

    /** Every value of the topic up to the end offsets (for read_committed, the last stable offsets). */
    static List<Integer> readAll(String bootstrap, String topic, String isolation) {
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(bootstrap, isolation))) {
            List<TopicPartition> tps = c.partitionsFor(topic).stream()
                    .map(i -> new TopicPartition(topic, i.partition())).collect(Collectors.toList());
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            List<Integer> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("not read to the end");
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) got.add(Integer.valueOf(r.value()));
            }
            Collections.sort(got);
            return got;
        }
    }

    static void send(KafkaProducer<String, String> p, String topic, int value, int partitions) {
        p.send(new ProducerRecord<>(topic, value % partitions, null, String.valueOf(value)));
    }

    static String join(List<Integer> values) {
        return values.stream().map(String::valueOf).collect(Collectors.joining(" "));
    }

    public static void main(String[] args) throws Exception {
        String scenario = args[0], bootstrap = args[1];
        switch (scenario) {
            case "cycle": {
                String topic = args[2];
                try (KafkaProducer<String, String> p = producer(bootstrap, args[3])) {
                    int[][] rounds = {{0, 1}, {100, 0}, {200, 1}};
                    for (int[] round : rounds) {
                        p.beginTransaction();
                        for (int v = round[0]; v < round[0] + 10; v++) send(p, topic, v, 2);
                        p.flush();
                        if (round[1] == 1) p.commitTransaction(); else p.abortTransaction();
                    }
                }
                // EndTxn answers before the markers are written: wait until the committed records are stable
                long deadline = System.currentTimeMillis() + 30_000;
                List<Integer> committed = readAll(bootstrap, topic, "read_committed");
                while (committed.size() < 20 && System.currentTimeMillis() < deadline) {
                    Thread.sleep(200);
                    committed = readAll(bootstrap, topic, "read_committed");
                }
                System.out.println("read_committed " + join(committed));
                System.out.println("read_uncommitted " + join(readAll(bootstrap, topic, "read_uncommitted")));
                break;
            }
            case "ctp": {
                String source = args[2], sink = args[3], group = args[4], txnId = args[5];
                int count = Integer.parseInt(args[6]);
                Properties cp = consumerProps(bootstrap, "read_committed");
                cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
                try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp);
                     KafkaProducer<String, String> p = producer(bootstrap, txnId)) {
                    c.subscribe(List.of(source));
                    for (int round = 0; round < 2; round++) {
                        List<ConsumerRecord<String, String>> got = new ArrayList<>();
                        long deadline = System.currentTimeMillis() + 60_000;
                        while (got.size() < count) {
                            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("read " + got.size());
                            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) got.add(r);
                        }
                        p.beginTransaction();
                        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                        for (ConsumerRecord<String, String> r : got) {
                            p.send(new ProducerRecord<>(sink, r.partition(), null, String.valueOf(Integer.parseInt(r.value()) * 10)));
                            offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                        }
                        p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                        if (round == 0) {
                            p.flush();
                            p.abortTransaction();
                            for (TopicPartition tp : c.assignment()) c.seek(tp, 0);
                        } else {
                            p.commitTransaction();
                        }
                    }
                    Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment(), Duration.ofSeconds(30));
                    System.out.println("offsets " + committed.entrySet().stream()
                            .sorted(Comparator.comparing(e -> e.getKey().partition()))
                            .map(e -> e.getKey().partition() + "=" + (e.getValue() == null ? "none" : e.getValue().offset()))
                            .collect(Collectors.joining(" ")));
                }
                break;
            }
            case "zombie": {
                String topic = args[2], txnId = args[3];
                KafkaProducer<String, String> a = producer(bootstrap, txnId);
                a.beginTransaction();
                send(a, topic, 1, 1);
                send(a, topic, 2, 1);
                a.flush();
                try (KafkaProducer<String, String> b = producer(bootstrap, txnId)) {
                    String fenced = "not fenced";
                    try {
                        send(a, topic, 3, 1);
                        a.commitTransaction();
                    } catch (KafkaException e) {
                        fenced = e.getClass().getSimpleName()
                                + (e.getCause() != null ? "/" + e.getCause().getClass().getSimpleName() : "");
                    }
                    System.out.println("fenced " + fenced);
                    b.beginTransaction();
                    send(b, topic, 10, 1);
                    b.commitTransaction();
                } finally {
                    a.close(Duration.ZERO);
                }
                break;
            }
            default:
                throw new IllegalArgumentException(scenario);
        }
    }
}
