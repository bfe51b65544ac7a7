import java.io.File;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.record.internal.FileRecords;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Kafka 4.4's own classes read a compacted partition, one line per record: "rec OFFSET KEY VALUE" (KEY and
 * VALUE as UTF-8, "-" for null).
 *
 *   files SEGMENT...                  FileRecords (each batch's CRC and layout checked by ensureValid), and
 *                                     "batch BASE LAST PRODUCER CONTROL DELETE_HORIZON" (-1: none) per batch
 *   consume BOOTSTRAP TOPIC COUNT     a KafkaConsumer from the start of partition 0 until COUNT records
 *                                     (or 30 s), read_uncommitted, as an application would read it
 */
public class KafkaCompactedReader {
    static String text(ByteBuffer b) {
        if (b == null) return "-";
        byte[] bytes = new byte[b.remaining()];
        b.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    static String text(byte[] b) {
        return b == null ? "-" : new String(b, StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("files")) {
            for (int i = 1; i < args.length; i++) {
                try (FileRecords records = FileRecords.open(new File(args[i]))) {
                    for (RecordBatch batch : records.batches()) {
                        batch.ensureValid();
                        System.out.println("batch " + batch.baseOffset() + " " + batch.lastOffset() + " "
                            + batch.producerId() + " " + batch.isControlBatch() + " "
                            + batch.deleteHorizonMs().orElse(-1L));
                        if (batch.isControlBatch()) continue;
                        for (Record r : batch) {
                            System.out.println("rec " + r.offset() + " " + text(r.key()) + " " + text(r.value()));
                        }
                    }
                }
            }
            return;
        }
        String bootstrap = args[1], topic = args[2];
        int count = Integer.parseInt(args[3]);
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.put("enable.auto.commit", "false");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(Collections.singletonList(tp));
            consumer.seekToBeginning(Collections.singletonList(tp));
            long deadline = System.currentTimeMillis() + 30000;
            int seen = 0;
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    System.out.println("rec " + r.offset() + " " + text(r.key()) + " " + text(r.value()));
                    seen++;
                }
            }
        }
    }
}
