// Reads a kafkawire segment file with Kafka's own FileRecords (kafka-clients), to check that the
// bytes on disk are what a Kafka broker would have written and that Kafka's searches agree with ours.
//
//   KafkaSegmentReader <file> <n> <offset>*n <timestamp>*
//
// prints, one per line:
//   batch <position> <size> <base> <last> <maxTs> <tsType>    every batch, after ensureValid() (magic, size, CRC)
//   offset <offset> <position>                                 searchForOffsetWithSize(offset, 0)
//   time <ts> <offset> <timestamp> | time <ts> none            searchForTimestamp(ts, 0, 0)
import java.io.File;
import org.apache.kafka.common.record.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.FileRecords;

public class KafkaSegmentReader {
    public static void main(String[] args) throws Exception {
        try (FileRecords records = FileRecords.open(new File(args[0]), false)) {
            for (FileChannelRecordBatch batch : records.batches()) {
                batch.ensureValid();
                System.out.println("batch " + batch.position() + " " + batch.sizeInBytes() + " " + batch.baseOffset()
                    + " " + batch.lastOffset() + " " + batch.maxTimestamp() + " " + batch.timestampType());
            }
            int n = Integer.parseInt(args[1]);
            for (int i = 2; i < 2 + n; i++) {
                long offset = Long.parseLong(args[i]);
                FileRecords.LogOffsetPosition found = records.searchForOffsetWithSize(offset, 0);
                System.out.println("offset " + offset + " " + found.position);
            }
            for (int i = 2 + n; i < args.length; i++) {
                long ts = Long.parseLong(args[i]);
                FileRecords.TimestampAndOffset found = records.searchForTimestamp(ts, 0, 0L);
                System.out.println(found == null ? "time " + ts + " none"
                                                 : "time " + ts + " " + found.offset + " " + found.timestamp);
            }
        }
    }
}
