import java.io.File;
import java.nio.ByteBuffer;
import java.util.Base64;

import org.apache.kafka.common.record.internal.FileRecords;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.record.internal.ControlRecordType;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.common.runtime.Deserializer;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.generated.GroupMetadataKey;
import org.apache.kafka.coordinator.group.generated.GroupMetadataValue;
import org.apache.kafka.coordinator.group.generated.OffsetCommitKey;
import org.apache.kafka.coordinator.group.generated.OffsetCommitValue;

/**
 * Reads __consumer_offsets segment files with Kafka 4.4's own classes (FileRecords, which checks each
 * batch's CRC, and GroupCoordinatorRecordSerde, the group coordinator's record reader) and prints one
 * tab-separated line per batch event, for the Python test to compare with what kafkawire wrote:
 *
 *   marker  P  producerId  COMMIT|ABORT
 *   offset  P  txn|plain  producerId  group  topic  partition  hashPartition  offset|-  leaderEpoch  metadata  commitTs  valueVersion
 *   group   P  group  hashPartition  protocolType|-  generation  protocol  leader  valueVersion  members...
 *   consumer  P  group  hashPartition  key  value|-  valueVersion   (the consumer protocol's records, as Kafka prints them)
 *   other   P  keyClass
 *
 * Arguments: the partition count, then (partition, segment file) pairs. hashPartition is
 * Utils.abs(group.hashCode()) % partitions: where Kafka looks for the group.
 */
public class KafkaOffsetsRecords {
    public static void main(String[] args) throws Exception {
        int partitions = Integer.parseInt(args[0]);
        GroupCoordinatorRecordSerde serde = new GroupCoordinatorRecordSerde();
        for (int i = 1; i + 1 < args.length; i += 2) {
            String p = args[i];
            try (FileRecords records = FileRecords.open(new File(args[i + 1]))) {
                for (RecordBatch batch : records.batches()) {
                    batch.ensureValid();
                    for (Record record : batch) {
                        if (batch.isControlBatch()) {
                            ControlRecordType type = ControlRecordType.parse(record.key());
                            System.out.println("marker\t" + p + "\t" + batch.producerId() + "\t" + type);
                            continue;
                        }
                        CoordinatorRecord r;
                        try {
                            r = serde.deserialize(record.key(), record.value());
                        } catch (Deserializer.UnknownRecordTypeException e) {
                            // Kafka's loader logs and skips these (CoordinatorLoaderImpl)
                            System.out.println("unknown\t" + p + "\t" + e.unknownType());
                            continue;
                        }
                        String txn = batch.isTransactional() ? "txn" : "plain";
                        if (r.key() instanceof OffsetCommitKey) {
                            OffsetCommitKey k = (OffsetCommitKey) r.key();
                            int hash = Utils.abs(k.group().hashCode()) % partitions;
                            StringBuilder line = new StringBuilder("offset\t" + p + "\t" + txn + "\t" + batch.producerId()
                                + "\t" + k.group() + "\t" + k.topic() + "\t" + k.partition() + "\t" + hash);
                            if (r.value() == null) {
                                line.append("\t-");
                            } else {
                                OffsetCommitValue v = (OffsetCommitValue) r.value().message();
                                line.append("\t" + v.offset() + "\t" + v.leaderEpoch() + "\t" + v.metadata() + "\t"
                                    + v.commitTimestamp() + "\t" + r.value().version());
                            }
                            System.out.println(line);
                        } else if (r.key() instanceof GroupMetadataKey) {
                            GroupMetadataKey k = (GroupMetadataKey) r.key();
                            int hash = Utils.abs(k.group().hashCode()) % partitions;
                            StringBuilder line = new StringBuilder("group\t" + p + "\t" + k.group() + "\t" + hash);
                            if (r.value() == null) {
                                line.append("\t-");
                            } else {
                                GroupMetadataValue v = (GroupMetadataValue) r.value().message();
                                line.append("\t" + v.protocolType() + "\t" + v.generation() + "\t" + v.protocol() + "\t"
                                    + v.leader() + "\t" + r.value().version());
                                for (GroupMetadataValue.MemberMetadata m : v.members()) {
                                    line.append("\t" + m.memberId() + "," + m.groupInstanceId() + "," + m.clientId() + ","
                                        + m.sessionTimeout() + "," + m.rebalanceTimeout() + ","
                                        + Base64.getEncoder().encodeToString(m.subscription()) + ","
                                        + Base64.getEncoder().encodeToString(m.assignment()));
                                }
                            }
                            System.out.println(line);
                        } else if (r.key().getClass().getSimpleName().startsWith("ConsumerGroup")) {
                            String group = (String) r.key().getClass().getMethod("groupId").invoke(r.key());
                            int hash = Utils.abs(group.hashCode()) % partitions;
                            System.out.println("consumer\t" + p + "\t" + group + "\t" + hash + "\t" + r.key()
                                + "\t" + (r.value() == null ? "-" : r.value().message() + "\t" + r.value().version()));
                        } else {
                            System.out.println("other\t" + p + "\t" + r.key().getClass().getSimpleName());
                        }
                    }
                }
            }
        }
    }
}
